"""`Client.watch` and `AsyncClient` against the real service (the Worker in
workerd, SELFCAP_TEST_URL): the client library's own watch loop (WebSocket,
long-poll, signed reads) run from Python, stopped cleanly by `close`, by
leaving a `with` block, by dropping the iterator and by Ctrl-C."""

import asyncio
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import selfcap
from test_client import minimal_for, url  # noqa: F401  (the fixture)


def publish(svc, me, title):
    capsule = minimal_for(me.agent_id)
    capsule["objectives"][0]["title"] = title
    return svc.publish(capsule)


def watch_threads():
    """The Rust watch threads of this process (Linux: /proc names them)."""
    tasks = Path("/proc/self/task")
    assert tasks.is_dir(), "this test reads /proc (Linux)"
    return sum(1 for t in tasks.iterdir() if _name(t) == "selfcap-watch")


def _name(task: Path) -> str:
    """A thread's name, or "" for one that ended since the directory was
    listed (its entry goes away between listing and reading)."""
    try:
        return (task / "comm").read_text().strip()
    except OSError:  # FileNotFoundError, or ESRCH while it is being reaped
        return ""


def take(heads, seconds=15.0):
    """The next head, or fail after `seconds` (the watch is closed then): a
    test that waits for a head never hangs the suite."""
    got = []

    def run():
        try:
            got.append(next(heads))
        except BaseException as e:  # noqa: B036 (handed to the test)
            got.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    if not got:
        heads.close(timeout=0)
        pytest.fail(f"no head within {seconds} s")
    if isinstance(got[0], BaseException):
        raise got[0]
    return got[0]


def until(predicate, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.parametrize("channel", ["auto", "websocket"])
def test_a_publish_while_watching_is_the_next_head(url, home, channel):
    me = selfcap.Identity.create(home=home)
    svc = selfcap.Client(url, identity=me)
    first = publish(svc, me, "one")
    with svc.watch(channel=channel) as heads:
        head = take(heads)
        assert isinstance(head, selfcap.Head)
        assert (head.agent_id, head.seq, head.cursor) == (me.agent_id, 1, first.cursor)
        second = publish(svc, me, "two")
        head = take(heads)
        assert (head.seq, head.cursor) == (2, second.cursor)
        started = time.monotonic()
    # Leaving the block stopped it: the WebSocket closed, the thread ended.
    assert heads.stopped and time.monotonic() - started < 5
    assert heads.close(timeout=0) is True
    assert list(heads) == []


def test_another_agents_heads_over_long_poll_and_a_poll_in_flight_delivers_nothing(url, home, monkeypatch):
    me = selfcap.Identity.create(home=home / "me")
    svc = selfcap.Client(url, identity=me)
    publish(svc, me, "one")
    # No identity: an anonymous watcher of a public capsule.
    nobody = home / "nobody"
    nobody.mkdir()
    monkeypatch.setenv("SELFCAP_HOME", str(nobody))
    heads = selfcap.Client(url).watch(me.agent_id, channel="longpoll")
    assert take(heads).seq == 1
    second = publish(svc, me, "two")
    assert take(heads).cursor == second.cursor
    # The next poll is held by the service: stopping cannot end it at once...
    assert heads.close(timeout=0) is False
    # ...but the write that ends it is not delivered, and the thread ends.
    publish(svc, me, "three")
    assert heads.close(timeout=10) is True
    assert list(heads) == []


def test_breaking_out_of_the_loop_stops_the_rust_side(url, home):
    me = selfcap.Identity.create(home=home)
    svc = selfcap.Client(url, identity=me)
    publish(svc, me, "one")
    before = watch_threads()
    for head in svc.watch():
        assert head.seq == 1
        assert watch_threads() == before + 1
        break
    # The iterator is gone: dropping it stopped the watch, whose thread ends.
    until(lambda: watch_threads() == before)


def test_a_private_capsule_is_watched_by_a_granted_reader_and_going_private_ends_an_anonymous_watch(
    url, home, monkeypatch
):
    owner = selfcap.Identity.create(home=home / "owner")
    reader = selfcap.Identity.create(home=home / "reader")
    owner_svc = selfcap.Client(url, identity=owner)
    capsule = minimal_for(owner.agent_id)
    owner_svc.publish(capsule)
    nobody = home / "nobody"
    nobody.mkdir()
    monkeypatch.setenv("SELFCAP_HOME", str(nobody))
    with selfcap.Client(url).watch(owner.agent_id) as anonymous:
        assert take(anonymous).seq == 1
        capsule["access_control"] = {"public": False, "authorized_readers": [reader.agent_id]}
        owner_svc.publish(capsule)
        # Closed with 4404: not readable by this watcher any more (the CLI exits 7).
        with pytest.raises(selfcap.NotFoundError) as caught:
            take(anonymous)
        assert caught.value.exit_code == 7
    # The granted reader's watch is signed.
    with selfcap.Client(url, identity=reader).watch(owner.agent_id) as heads:
        assert take(heads).seq == 2
        capsule["objectives"][0]["status"] = "done"
        third = owner_svc.publish(capsule)
        assert take(heads).cursor == third.cursor


def test_local_errors_are_raised_when_the_watch_starts(url, home, monkeypatch):
    monkeypatch.setenv("SELFCAP_HOME", str(home))
    with pytest.raises(selfcap.LocalError):
        selfcap.Client(url).watch()  # whose? no identity
    with pytest.raises(ValueError):
        selfcap.Client(url).watch("not-an-agent-id")
    with pytest.raises(ValueError):
        selfcap.Client(url).watch("a" * 64, channel="carrier-pigeon")


def test_ctrl_c_stops_a_watch_at_once(url, home):
    me = selfcap.Identity.create(home=home)
    svc = selfcap.Client(url, identity=me)
    publish(svc, me, "one")
    script = textwrap.dedent(
        f"""
        import selfcap, sys
        svc = selfcap.Client({url!r}, identity=selfcap.Identity.load(home={str(home)!r}))
        try:
            for head in svc.watch():
                print("head", head.seq, flush=True)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            sys.exit(42)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    # Never hang the suite: a child that prints nothing is killed (and fails below).
    guard = threading.Timer(30, child.kill)
    guard.start()
    try:
        assert child.stdout.readline().split() == ["head", "1"]
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        assert child.wait(timeout=10) == 42
        assert time.monotonic() - sent < 5
        assert child.stdout.read().strip() == "interrupted"
    finally:
        guard.cancel()
        if child.poll() is None:
            child.kill()


def test_the_async_client(url, home):
    me = selfcap.Identity.create(home=home)
    svc = selfcap.AsyncClient(url, identity=me)

    async def main():
        assert (await svc.bootstrap())["agent_id"] == me.agent_id
        capsule = minimal_for(me.agent_id)
        first = await svc.publish(capsule)
        assert (first.seq, first.sent) == (1, True)
        head = await svc.head()
        assert head.cursor == first.cursor
        assert await svc.head(etag=head.etag) is None
        assert selfcap.canonicalize(await svc.read()) == selfcap.canonicalize(capsule)
        assert "Ship the Python package" in await svc.rehydrate()
        assert (await svc.verify()).valid
        assert (await svc.export())["agent_id"] == me.agent_id
        with pytest.raises(selfcap.NotFoundError):
            await svc.read("b" * 64)
        async with svc.watch() as heads:
            assert (await heads.__anext__()).seq == 1
            # Other tasks run while the watch waits.
            waiting = asyncio.ensure_future(heads.__anext__())
            await asyncio.sleep(0.3)
            assert not waiting.done()
            capsule["objectives"][0]["status"] = "done"
            second = await svc.publish(capsule)
            assert (await asyncio.wait_for(waiting, 10)).cursor == second.cursor
            assert (await svc.history())["versions"][0]["seq"] == 2
        assert heads.stopped
        # async for, ended by aclose() from another task.
        seen = []
        heads = svc.watch()

        async def stop_soon():
            await asyncio.sleep(0.3)
            assert await heads.aclose() is True

        stopper = asyncio.ensure_future(stop_soon())
        async for head in heads:
            seen.append(head.seq)
        await stopper
        assert seen == [2]

    asyncio.run(asyncio.wait_for(main(), 60))
