//! The deployment's totals (`GET /api/v1/admin/stats`) without reading every
//! agent and without an object on every write's path.
//!
//! Each agent's object counts what happens to it into a [`Report`] (kept in
//! its state, so nothing counted is lost) and sends it, at most once a
//! minute and off the request path, to one of [`SHARDS`] shard objects
//! chosen by the agent id's first hex digit. A shard folds reports into its
//! [`Shard`] totals, each agent's batch once (the batch number makes a
//! resent report harmless). `/stats` asks every shard for its totals as of
//! now and adds them ([`Totals::add`]).
//!
//! Agents on each tier are counted without any event at expiry: a shard
//! keeps, per plan, a difference map over hours (+1 where an agent's paid
//! time on that plan starts, -1 where it ends), so the count at any moment
//! is the sum of the map up to it. An agent's report carries its paid time
//! before and after the batch; the shard takes the old segments out and puts
//! the new ones in.

use super::{hour_of, HOUR_MS};
use crate::core::limits::Tier;
use crate::core::reason::ReasonCode;
use crate::core::time::rfc3339;
use crate::core::upgrade::amount::Usdc;
use crate::core::upgrade::invoice::Entitlement;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Shard objects (the agent id's first hex digit picks one).
pub const SHARDS: u8 = 16;
/// The longest rolling count kept (hours): 7 days.
pub const HOURS_KEPT: u64 = 7 * 24;
/// How often at most an agent's object sends its report (ms).
pub const FLUSH_EVERY_MS: u64 = 60_000;

/// The shard of `agent_id` (`0..SHARDS`).
pub fn shard_of(agent_id: &str) -> u8 {
    agent_id
        .as_bytes()
        .first()
        .and_then(|b| (*b as char).to_digit(16))
        .unwrap_or(0) as u8
}

/// How a plan was paid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// A USDC transfer, then a claim (`/upgrade/claim`).
    Transfer,
    /// x402 (`/upgrade/x402`).
    X402,
}

/// Counts of one hour.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HourCounts {
    /// Accepted writes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub writes: u64,
    /// Refusals (that authenticated as their agent) by reason class.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub refusals: BTreeMap<String, u64>,
    /// Plans credited, by method and plan (`"x402:pro"`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub plans: BTreeMap<String, u64>,
    /// USDC received, atomic units, by method.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub usdc: BTreeMap<String, u64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl HourCounts {
    fn add(&mut self, o: &HourCounts) {
        self.writes += o.writes;
        for (m, src) in [
            (&mut self.refusals, &o.refusals),
            (&mut self.plans, &o.plans),
            (&mut self.usdc, &o.usdc),
        ] {
            for (k, v) in src {
                *m.entry(k.clone()).or_default() += v;
            }
        }
    }
}

fn method_name(m: Method) -> &'static str {
    match m {
        Method::Transfer => "transfer",
        Method::X402 => "x402",
    }
}

/// What one agent's object reports to its shard.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// The agent's batch number: a shard applies each batch once.
    #[serde(default)]
    pub batch: u64,
    /// The agent was created (its first write was accepted).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub new_agent: bool,
    /// Its paid time before this batch's first change and after its last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paid: Option<(Entitlement, Entitlement)>,
    /// What happened, per Unix hour.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hours: BTreeMap<u64, HourCounts>,
    /// x402 settlements begun (the time) or ended (`None`), by invoice id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settlements: BTreeMap<String, Option<u64>>,
    /// Its count of disputed keys, when that changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disputed: Option<u64>,
}

impl Report {
    fn hour(&mut self, at_ms: u64) -> &mut HourCounts {
        self.hours.entry(hour_of(at_ms)).or_default()
    }

    /// An accepted write.
    pub fn write(&mut self, at_ms: u64, first: bool) {
        self.hour(at_ms).writes += 1;
        self.new_agent |= first;
    }

    /// A refusal of a body that authenticated as the agent.
    pub fn refusal(&mut self, codes: &[ReasonCode], at_ms: u64) {
        let class = codes.first().map_or("fix_payload", |c| c.class().as_str());
        *self
            .hour(at_ms)
            .refusals
            .entry(class.to_owned())
            .or_default() += 1;
    }

    /// Paid time changed from `before` to `after`.
    pub fn paid(&mut self, before: &Entitlement, after: &Entitlement) {
        let first = match self.paid.take() {
            Some((first, _)) => first,
            None => before.clone(),
        };
        self.paid = Some((first, after.clone()));
    }

    /// A plan credited.
    pub fn credit(&mut self, method: Method, plan: Tier, amount: Usdc, at_ms: u64) {
        let h = self.hour(at_ms);
        let key = format!("{}:{}", method_name(method), plan.as_str());
        *h.plans.entry(key).or_default() += 1;
        *h.usdc.entry(method_name(method).to_owned()).or_default() += amount.0;
    }

    /// An x402 settlement begun (`Some(start)`) or ended (`None`).
    pub fn settlement(&mut self, invoice_id: &str, started_ms: Option<u64>) {
        self.settlements.insert(invoice_id.to_owned(), started_ms);
    }

    /// The agent's disputed keys now.
    pub fn disputed(&mut self, keys: u64) {
        self.disputed = Some(keys);
    }

    /// Nothing to send.
    pub fn is_empty(&self) -> bool {
        !self.new_agent
            && self.paid.as_ref().is_none_or(|(a, b)| a == b)
            && self.hours.is_empty()
            && self.settlements.is_empty()
            && self.disputed.is_none()
    }
}

/// What an agent's object still has to tell its shard: counts since the
/// last batch, and the batch in flight (resent as it is until the shard
/// acknowledges it, so a lost answer never counts anything twice).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    /// The agent (its object does not reliably know its own name, and the
    /// alarm that sends needs it).
    pub agent_id: String,
    /// Counted since the batch in flight was cut.
    #[serde(default)]
    pub report: Report,
    /// The batch sent and not yet acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sending: Option<Report>,
    /// The next batch's number.
    #[serde(default)]
    pub next_batch: u64,
    /// When the object's alarm should send (Unix ms); `None`: nothing to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due_at_ms: Option<u64>,
}

impl Pending {
    /// Counts something into the report at `now_ms`, and asks to be sent
    /// within [`FLUSH_EVERY_MS`] (an earlier request stands).
    pub fn note(&mut self, now_ms: u64, f: impl FnOnce(&mut Report)) {
        f(&mut self.report);
        if self.due_at_ms.is_none() {
            self.due_at_ms = Some(now_ms + FLUSH_EVERY_MS);
        }
    }

    /// The batch to send now: the one in flight, else the report cut into
    /// a new batch; `None` when there is nothing to say.
    pub fn batch(&mut self) -> Option<Report> {
        if self.sending.is_none() && !self.report.is_empty() {
            let mut r = std::mem::take(&mut self.report);
            r.batch = self.next_batch;
            self.next_batch += 1;
            self.sending = Some(r);
        }
        self.sending.clone()
    }

    /// The shard acknowledged batch `batch`: it is done; the alarm is
    /// needed again only if more was counted meanwhile.
    pub fn acknowledged(&mut self, batch: u64, now_ms: u64) {
        if self.sending.as_ref().is_some_and(|r| r.batch == batch) {
            self.sending = None;
        }
        self.due_at_ms =
            (self.sending.is_some() || !self.report.is_empty()).then_some(now_ms + FLUSH_EVERY_MS);
    }

    /// The shard could not be reached: try again in a while.
    pub fn failed(&mut self, now_ms: u64) {
        self.due_at_ms = Some(now_ms + FLUSH_EVERY_MS);
    }
}

/// A difference map over hours: the count at a moment is the sum of the
/// entries up to its hour. Entries in the past are folded into `base`, so
/// the map only holds what is still to come.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeline {
    /// The sum of every entry folded in.
    #[serde(default)]
    pub base: i64,
    /// Hour → change, for hours after the last fold.
    #[serde(default)]
    pub steps: BTreeMap<u64, i64>,
}

impl Timeline {
    fn step(&mut self, hour: u64, by: i64, now_hour: u64) {
        if hour <= now_hour {
            self.base += by;
        } else {
            let e = self.steps.entry(hour).or_default();
            *e += by;
            if *e == 0 {
                self.steps.remove(&hour);
            }
        }
    }

    fn fold(&mut self, now_hour: u64) {
        let later = self.steps.split_off(&(now_hour + 1));
        self.base += self.steps.values().sum::<i64>();
        self.steps = later;
    }

    /// The count at `now_ms`.
    pub fn at(&self, now_ms: u64) -> i64 {
        let h = hour_of(now_ms);
        self.base + self.steps.range(..=h).map(|(_, v)| v).sum::<i64>()
    }
}

/// The hours during which `paid` holds each paid plan, as `(plan, from,
/// until)` in Unix hours: Plus until its end, then Pro until its end (the
/// order the tier in force follows). An end is rounded up to its hour, a
/// count at most one hour late.
fn segments(paid: &Entitlement) -> Vec<(Tier, u64, u64)> {
    let up = |ms: u64| ms.div_ceil(HOUR_MS);
    let plus_end = paid.plus_until_ms.map(up).unwrap_or(0);
    let mut out = Vec::new();
    if plus_end > 0 {
        out.push((Tier::Plus, 0, plus_end));
    }
    if let Some(pro) = paid.pro_until_ms.map(up) {
        if pro > plus_end {
            out.push((Tier::Pro, plus_end, pro));
        }
    }
    out
}

/// One shard's totals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Agents created.
    #[serde(default)]
    pub agents: u64,
    /// Agents on each paid plan, over time (`"pro"`, `"plus"`).
    #[serde(default)]
    pub tiers: BTreeMap<String, Timeline>,
    /// The last 7 days, per Unix hour.
    #[serde(default)]
    pub hours: BTreeMap<u64, HourCounts>,
    /// Everything credited, ever (hours older than 7 days are folded in).
    #[serde(default)]
    pub earlier: HourCounts,
    /// x402 settlements in flight: `"{agent}:{invoice}"` → when begun.
    #[serde(default)]
    pub settling: BTreeMap<String, u64>,
    /// Agents with disputed keys → how many keys.
    #[serde(default)]
    pub disputed: BTreeMap<String, u64>,
}

impl Shard {
    /// Folds `agent_id`'s report in at `now_ms`.
    pub fn apply(&mut self, agent_id: &str, r: &Report, now_ms: u64) {
        let now_hour = hour_of(now_ms);
        self.agents += u64::from(r.new_agent);
        if let Some((before, after)) = &r.paid {
            for (paid, sign) in [(before, -1), (after, 1)] {
                for (plan, from, until) in segments(paid) {
                    let t = self.tiers.entry(plan.as_str().to_owned()).or_default();
                    t.step(from, sign, now_hour);
                    t.step(until, -sign, now_hour);
                }
            }
        }
        for (h, c) in &r.hours {
            self.hours.entry(*h).or_default().add(c);
        }
        for (invoice, started) in &r.settlements {
            let key = format!("{agent_id}:{invoice}");
            match started {
                Some(at) => self.settling.insert(key, *at),
                None => self.settling.remove(&key),
            };
        }
        match r.disputed {
            Some(0) => {
                self.disputed.remove(agent_id);
            }
            Some(n) => {
                self.disputed.insert(agent_id.to_owned(), n);
            }
            None => {}
        }
        self.fold(now_hour);
    }

    /// Moves what is older than the rolling counts into `earlier` (only the
    /// credits are kept for ever) and folds past tier steps.
    fn fold(&mut self, now_hour: u64) {
        let keep_from = now_hour.saturating_sub(HOURS_KEPT - 1);
        let recent = self.hours.split_off(&keep_from);
        for c in self.hours.values() {
            self.earlier.add(&HourCounts {
                plans: c.plans.clone(),
                usdc: c.usdc.clone(),
                ..HourCounts::default()
            });
        }
        self.hours = recent;
        for t in self.tiers.values_mut() {
            t.fold(now_hour);
        }
    }

    /// This shard's totals at `now_ms`.
    pub fn totals(&self, now_ms: u64) -> Totals {
        let now_hour = hour_of(now_ms);
        let within = |hours: u64| {
            let from = now_hour.saturating_sub(hours - 1);
            let mut c = HourCounts::default();
            for (_, h) in self.hours.range(from..=now_hour) {
                c.add(h);
            }
            c
        };
        let mut ever = self.earlier.clone();
        for h in self.hours.values() {
            ever.add(&HourCounts {
                plans: h.plans.clone(),
                usdc: h.usdc.clone(),
                ..HourCounts::default()
            });
        }
        let on = |plan: Tier| {
            self.tiers
                .get(plan.as_str())
                .map_or(0, |t| t.at(now_ms).max(0) as u64)
        };
        Totals {
            agents: self.agents,
            pro: on(Tier::Pro),
            plus: on(Tier::Plus),
            day: within(24),
            week: within(HOURS_KEPT),
            ever,
            settling: self.settling.len() as u64,
            oldest_settling_ms: self.settling.values().min().copied(),
            disputing_agents: self.disputed.len() as u64,
            disputed_keys: self.disputed.values().sum(),
            shards: 1,
        }
    }
}

/// Totals as one shard, or several added, knows them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    /// Agents created.
    pub agents: u64,
    /// On Pro now.
    pub pro: u64,
    /// On Plus now.
    pub plus: u64,
    /// The last 24 hours.
    pub day: HourCounts,
    /// The last 7 days.
    pub week: HourCounts,
    /// Credits ever.
    pub ever: HourCounts,
    /// x402 settlements in flight.
    pub settling: u64,
    /// When the oldest of them began (Unix ms).
    pub oldest_settling_ms: Option<u64>,
    /// Agents with disputed keys.
    pub disputing_agents: u64,
    /// Disputed keys.
    pub disputed_keys: u64,
    /// Shards that answered.
    pub shards: u64,
}

impl Totals {
    /// Adds another shard's totals.
    pub fn add(&mut self, o: &Totals) {
        self.agents += o.agents;
        self.pro += o.pro;
        self.plus += o.plus;
        self.day.add(&o.day);
        self.week.add(&o.week);
        self.ever.add(&o.ever);
        self.settling += o.settling;
        self.oldest_settling_ms = match (self.oldest_settling_ms, o.oldest_settling_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.disputing_agents += o.disputing_agents;
        self.disputed_keys += o.disputed_keys;
        self.shards += o.shards;
    }

    /// The body of `GET /api/v1/admin/stats` at `now_ms`.
    pub fn body(&self, now_ms: u64) -> serde_json::Value {
        let credits = |c: &HourCounts| {
            let mut by = serde_json::Map::new();
            for m in [Method::Transfer, Method::X402] {
                let name = method_name(m);
                let plans = |plan: Tier| {
                    c.plans
                        .get(&format!("{name}:{}", plan.as_str()))
                        .copied()
                        .unwrap_or(0)
                };
                let usdc = Usdc(c.usdc.get(name).copied().unwrap_or(0));
                by.insert(
                    name.to_owned(),
                    serde_json::json!({
                        "plans": {"pro": plans(Tier::Pro), "plus": plans(Tier::Plus)},
                        "usdc": usdc.to_string(),
                        "usdc_atomic": usdc.0.to_string(),
                    }),
                );
            }
            serde_json::Value::Object(by)
        };
        let refusals = |c: &HourCounts| {
            serde_json::json!({
                "total": c.refusals.values().sum::<u64>(),
                "by_class": c.refusals,
            })
        };
        let free = self.agents.saturating_sub(self.pro + self.plus);
        serde_json::json!({
            "as_of": rfc3339(now_ms),
            "shards": {"answered": self.shards, "of": SHARDS},
            "agents": {
                "total": self.agents,
                "by_tier": {"free": free, "pro": self.pro, "plus": self.plus},
            },
            "writes": {"last_24h": self.day.writes, "last_7d": self.week.writes},
            "refusals": {"last_24h": refusals(&self.day), "last_7d": refusals(&self.week)},
            "credits": {
                "last_24h": credits(&self.day),
                "last_7d": credits(&self.week),
                "ever": credits(&self.ever),
            },
            "settlements": {
                "pending": self.settling,
                "oldest_started_at": self.oldest_settling_ms.map(rfc3339),
                "oldest_age_sec": self.oldest_settling_ms.map(|t| now_ms.saturating_sub(t) / 1000),
            },
            "disputes": {"agents": self.disputing_agents, "keys": self.disputed_keys},
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_780_000_000_000;
    const DAY: u64 = 24 * HOUR_MS;

    fn pro_until(ms: u64) -> Entitlement {
        Entitlement {
            pro_until_ms: Some(ms),
            plus_until_ms: None,
        }
    }

    #[test]
    fn agents_on_a_plan_are_counted_until_it_ends_with_no_event() {
        let mut s = Shard::default();
        let mut r = Report::default();
        r.write(T0, true);
        r.paid(&Entitlement::default(), &pro_until(T0 + 30 * DAY));
        s.apply("a1", &r, T0);
        let t = s.totals(T0 + DAY);
        assert_eq!((t.agents, t.pro, t.plus), (1, 1, 0));
        assert_eq!(s.totals(T0 + 31 * DAY).pro, 0, "lapsed without an event");
        // Renewed later: the old segment out, the new in.
        let mut renew = Report::default();
        renew.paid(&pro_until(T0 + 30 * DAY), &pro_until(T0 + 60 * DAY));
        s.apply("a1", &renew, T0 + 2 * DAY);
        assert_eq!(s.totals(T0 + 45 * DAY).pro, 1);
        assert_eq!(s.totals(T0 + 61 * DAY).pro, 0);
        // Plus bought during Pro: Plus now, Pro after it.
        let before = pro_until(T0 + 60 * DAY);
        let after = Entitlement {
            pro_until_ms: Some(T0 + 90 * DAY),
            plus_until_ms: Some(T0 + 33 * DAY),
        };
        let mut up = Report::default();
        up.paid(&before, &after);
        s.apply("a1", &up, T0 + 3 * DAY);
        let t = s.totals(T0 + 4 * DAY);
        assert_eq!((t.pro, t.plus), (0, 1));
        let t = s.totals(T0 + 40 * DAY);
        assert_eq!((t.pro, t.plus), (1, 0));
        assert_eq!(s.totals(T0 + 91 * DAY).pro, 0);
    }

    #[test]
    fn rolling_counts_credits_and_settlements() {
        let mut s = Shard::default();
        let mut r = Report::default();
        r.write(T0, true);
        r.refusal(&[ReasonCode::UnsafeContent], T0);
        r.refusal(&[ReasonCode::WriteQuotaExceeded], T0);
        r.credit(Method::X402, Tier::Pro, Usdc(5_004_217), T0);
        r.settlement("inv_1", Some(T0 - 1000));
        r.disputed(2);
        s.apply("a1", &r, T0);
        let t = s.totals(T0);
        assert_eq!(t.day.writes, 1);
        assert_eq!(t.day.refusals["fix_payload"], 1);
        assert_eq!(t.day.refusals["back_off"], 1);
        assert_eq!(t.day.usdc["x402"], 5_004_217);
        assert_eq!((t.settling, t.oldest_settling_ms), (1, Some(T0 - 1000)));
        assert_eq!((t.disputing_agents, t.disputed_keys), (1, 2));
        // Eight days later: out of both windows, still in the totals ever.
        let mut done = Report::default();
        done.settlement("inv_1", None);
        done.disputed(0);
        s.apply("a1", &done, T0 + 8 * DAY);
        let t = s.totals(T0 + 8 * DAY);
        assert_eq!((t.day.writes, t.week.writes), (0, 0));
        assert_eq!(t.ever.usdc["x402"], 5_004_217);
        assert_eq!(t.ever.plans["x402:pro"], 1);
        assert_eq!((t.settling, t.disputing_agents), (0, 0));
        let body = t.body(T0 + 8 * DAY);
        assert_eq!(body["credits"]["ever"]["x402"]["usdc"], "5.004217");
        assert_eq!(body["agents"]["by_tier"]["free"], 1);
    }

    #[test]
    fn shards_add_up() {
        let mut a = Shard::default().totals(T0);
        let mut one = Shard::default();
        let mut r = Report::default();
        r.write(T0, true);
        one.apply("b2", &r, T0);
        a.add(&one.totals(T0));
        a.add(&one.totals(T0));
        assert_eq!((a.agents, a.day.writes, a.shards), (2, 2, 3));
        assert_eq!(shard_of("f0"), 15);
        assert_eq!(shard_of("0a"), 0);
    }

    #[test]
    fn a_batch_is_cut_once_resent_until_acknowledged_and_counts_after_it_wait() {
        let mut p = Pending {
            agent_id: "ab".repeat(32),
            ..Pending::default()
        };
        assert_eq!(p.batch(), None, "nothing to say");
        p.note(T0, |r| r.write(T0, true));
        assert_eq!(p.due_at_ms, Some(T0 + FLUSH_EVERY_MS));
        // A later count does not postpone the send.
        p.note(T0 + 10, |r| r.write(T0 + 10, false));
        assert_eq!(p.due_at_ms, Some(T0 + FLUSH_EVERY_MS));
        let first = p.batch().unwrap();
        assert_eq!(first.batch, 0);
        assert_eq!(first.hours.values().map(|h| h.writes).sum::<u64>(), 2);
        // Counted while it is in flight: kept for the next batch; the
        // batch in flight is resent as it is.
        p.note(T0 + 20, |r| {
            r.refusal(&[ReasonCode::UnsafeContent], T0 + 20)
        });
        assert_eq!(p.batch(), Some(first.clone()));
        p.failed(T0 + 30);
        assert_eq!(p.batch(), Some(first.clone()));
        // An acknowledgement of another batch changes nothing.
        p.acknowledged(7, T0 + 40);
        assert_eq!(p.batch(), Some(first));
        p.acknowledged(0, T0 + 50);
        assert_eq!(
            p.due_at_ms,
            Some(T0 + 50 + FLUSH_EVERY_MS),
            "the refusal waits"
        );
        let second = p.batch().unwrap();
        assert_eq!(second.batch, 1);
        assert_eq!(second.hours.values().map(|h| h.writes).sum::<u64>(), 0);
        p.acknowledged(1, T0 + 60);
        assert_eq!(p.due_at_ms, None);
        assert_eq!(p.batch(), None);
    }
}
