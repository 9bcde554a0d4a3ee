"""The installed `selfcap mcp` as an LLM client starts it (`"command":
"selfcap", "args": ["mcp"]`), driven by the official MCP Python SDK."""

import asyncio
import json
import os

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from conftest import selfcap_command

# The local door's tools (docs/MCP.md): the public MCP server's names.
TOOLS = {
    "self_bootstrap",
    "self_rehydrate",
    "self_read",
    "self_write",
    "self_subscribe",
    "self_history",
    "self_checkpoint",
    "self_verify",
    "self_upgrade",
    "self_keys",
    "self_rotate",
    "self_feed",
    "self_meta",
}


def session_run(home, body, url=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SELFCAP_")}
    env["SELFCAP_HOME"] = str(home)
    if url:
        env["SELFCAP_URL"] = url
    params = StdioServerParameters(command=selfcap_command(), args=["mcp", "--no-import"], env=env)

    async def main():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                return await body(session, init)

    return asyncio.run(asyncio.wait_for(main(), timeout=60))


def test_tools_list_through_the_official_client(home):
    async def body(session, init):
        assert init.server_info.name == "selfcap"
        listed = await session.list_tools()
        return {t.name: t for t in listed.tools}

    tools = session_run(home, body)
    assert set(tools) == TOOLS
    assert all(t.description and t.input_schema.get("type") == "object" for t in tools.values())


def test_a_tool_call_without_an_identity_is_a_tool_error_not_a_crash(home):
    async def body(session, _init):
        result = await session.call_tool("self_read", {})
        return result

    result = session_run(home, body)
    assert result.is_error
    text = "".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    assert text, "the error says what went wrong"
    # The reader can parse it: the local tools answer JSON.
    json.loads(text)


def test_a_write_through_the_official_client_reaches_the_service(home):
    """self_bootstrap, then self_write of a capsule, as a model would call
    them; the service then serves that capsule."""
    import selfcap

    url = os.environ.get("SELFCAP_TEST_URL")
    assert url, "SELFCAP_TEST_URL is not set: run this through tests/e2e/python_package.test.mjs"

    async def body(session, _init):
        boot = await session.call_tool("self_bootstrap", {})
        assert not boot.is_error, boot.content
        agent = json.loads(boot.content[0].text)["agent_id"]
        capsule = selfcap.template(agent)
        capsule["objectives"] = [{"id": "mcp", "status": "in_progress", "title": "Written through MCP"}]
        wrote = await session.call_tool("self_write", {"capsule": capsule})
        return agent, capsule, wrote

    agent, capsule, wrote = session_run(home, body, url=url)
    assert not wrote.is_error, wrote.content
    answer = json.loads(wrote.content[0].text)
    assert answer["accepted"] is True and answer["seq"] == 1, answer
    assert answer["cursor"] == selfcap.cursor(capsule)
    # What the service serves, read with the package's own client.
    served = selfcap.Client(url).read(agent)
    assert served == capsule
