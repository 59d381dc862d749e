//! The agreement test's engine: seeded random sequences of every `Store` operation on a few
//! keys, applied step by step through the HTTP store to a real engine (DynamoDB Local,
//! dynalite) and through the in-memory store (`op::apply`) side by side. After each step the
//! two outcomes, and the two items (the engine's read back with a strongly consistent get),
//! must be equal, once what legitimately differs is set aside (`normalise`). A test module:
//! `engine_agrees` (ignored by a plain `cargo test`) is run by `__test__/agreement.test.js`
//! with the engine it started, and prints its report as tab-separated lines.

mod run;
mod step;

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_credential_types::provider::SharedCredentialsProvider;
use aws_credential_types::Credentials;

use crate::fifo::{entry_key, head_key};
use crate::item::{GuidValue, KeyValue, LockKey, LockRecord, TableSpec};
use crate::store::http::{HttpOptions, HttpStore};
use crate::store::memory::MemoryStore;
use crate::store::StoreOps;
use run::Outcome;
use step::{guid_number, Gen, Rng, Step};

/// Where and how long to run.
pub struct AgreementOptions {
    /// The engine's endpoint, e.g. `http://127.0.0.1:8000`.
    pub endpoint: String,
    pub region: String,
    /// A table with the partition key `pk` (S) and no sort key: lock items.
    pub table: String,
    /// A table with the partition key `pk` (S) and the sort key `sk` (S): Fifo heads and
    /// queue entries.
    pub fifo_table: String,
    pub seed: u32,
    pub steps: u32,
    /// Set aside the item a refusal returns (an engine that does not return it).
    pub ignore_refusal_items: Option<bool>,
}

/// How often one kind of operation applied and was refused.
pub struct AgreementCount {
    pub kind: String,
    pub applied: u32,
    pub refused: u32,
}

/// One step at which the engine and `op::apply` differ.
pub struct Disagreement {
    pub seed: u32,
    pub step: u32,
    pub kind: String,
    /// The key, and the operation with its arguments (guids by number: `g7`).
    pub key: String,
    pub op: String,
    /// The item before the step, as the memory store had it.
    pub before: String,
    pub engine_outcome: String,
    pub memory_outcome: String,
    pub engine_item: String,
    pub memory_item: String,
}

pub struct AgreementReport {
    pub steps: u32,
    pub counts: Vec<AgreementCount>,
    pub disagreements: Vec<Disagreement>,
}

/// The tables' key names, as `AgreementOptions` states them.
fn tables(o: &AgreementOptions) -> (TableSpec, TableSpec) {
    let lock = TableSpec {
        name: o.table.clone(),
        partition_key: "pk".into(),
        sort_key: None,
    };
    let fifo = TableSpec {
        name: o.fifo_table.clone(),
        partition_key: "pk".into(),
        sort_key: Some("sk".into()),
    };
    (lock, fifo)
}

fn http_store(o: &AgreementOptions, table: TableSpec) -> HttpStore {
    let credentials = Credentials::from_keys("dummy", "dummy", None);
    HttpStore::new(
        table,
        HttpOptions {
            region: Some(o.region.clone()),
            endpoint: Some(o.endpoint.clone()),
            credentials: Some(SharedCredentialsProvider::new(credentials)),
            ..Default::default()
        },
    )
}

/// The keys of a run: three lock items, two Fifo heads and four queue entries.
fn keys(seed: u32) -> Vec<(bool, LockKey)> {
    let mut v: Vec<(bool, LockKey)> = (0..3)
        .map(|i| {
            let key = LockKey {
                partition: KeyValue::S(format!("s{seed}-k{i}")),
                sort: None,
            };
            (false, key)
        })
        .collect();
    for r in 0..2 {
        let resource = KeyValue::S(format!("s{seed}-r{r}"));
        v.push((true, head_key(&resource)));
        v.push((true, entry_key(&resource, 1)));
        v.push((true, entry_key(&resource, 2)));
    }
    // Semaphores' heads (`SEM_PREFIX`).
    for m in 0..2 {
        v.push((true, head_key(&KeyValue::S(format!("s{seed}-{SEM_PREFIX}{m}")))));
    }
    v
}

/// The partition values of the semaphores' heads begin with this, after the seed's.
const SEM_PREFIX: &str = "m";

/// Runs `steps` seeded steps on both stores and reports every step where they differ.
pub async fn agreement_run(options: AgreementOptions) -> Result<AgreementReport, String> {
    let (lock_table, fifo_table) = tables(&options);
    let lock_http = Arc::new(http_store(&options, lock_table.clone()));
    let fifo_http = Arc::new(http_store(&options, fifo_table.clone()));
    let memory = MemoryStore::new(true);
    let mut rng = Rng::new(options.seed);
    let mut next_guid = 0u32;
    let mut counts: BTreeMap<&'static str, (u32, u32)> = BTreeMap::new();
    let mut disagreements = vec![];
    let keys = keys(options.seed);
    for n in 0..options.steps {
        let (fifo, key) = &keys[rng.below(keys.len() as u64) as usize];
        let (http, table) = if *fifo {
            (&fifo_http, &fifo_table)
        } else {
            (&lock_http, &lock_table)
        };
        let before = memory.record(key);
        let mut gen = Gen {
            rng: &mut rng,
            cur: before.as_ref(),
            now: 1_700_000_000_000 + u64::from(n) * 10,
            next_guid: &mut next_guid,
        };
        let step = match (fifo, key.sort.as_ref()) {
            (false, _) => gen.lock_step(),
            (true, Some(KeyValue::S(s))) if s == crate::fifo::HEAD_SORT_VALUE => match &key.partition {
                KeyValue::S(p) if p.starts_with(&format!("s{}-{SEM_PREFIX}", options.seed)) => gen.sem_head_step(),
                _ => gen.head_step(),
            },
            (true, _) => gen.entry_step(),
        };
        let mut mem = run::run(&memory, None, key, &step).await;
        let mut eng = run::run(http.as_ref(), Some((http, table)), key, &step).await;
        let (mem_item, eng_item) = (memory.record(key), http.get(key).await);
        let c = counts.entry(step.kind()).or_default();
        match mem {
            Outcome::Refused(_) => c.1 += 1,
            Outcome::Failed(_) => {}
            _ => c.0 += 1,
        }
        normalise(&step, &mut mem, &mut eng, options.ignore_refusal_items.unwrap_or(false));
        let eng_item = eng_item.map_err(|e| format!("read back: {e}"))?;
        let (m, e) = (mem_item.clone().map(plain), eng_item.clone().map(plain));
        if mem != eng || m != e {
            disagreements.push(Disagreement {
                seed: options.seed,
                step: n,
                kind: step.kind().into(),
                key: format!("{key:?}"),
                op: format!("{step:?}"),
                before: show(&before),
                engine_outcome: show_outcome(&eng),
                memory_outcome: show_outcome(&mem),
                engine_item: show(&eng_item),
                memory_item: show(&mem_item),
            });
            // Go on from the engine's item, so that one difference is reported once.
            match eng_item {
                Some(r) => memory.set(key, r),
                None => drop(memory.items.lock().unwrap().remove(key)),
            }
        }
    }
    Ok(AgreementReport {
        steps: options.steps,
        counts: counts
            .into_iter()
            .map(|(kind, (applied, refused))| AgreementCount {
                kind: kind.into(),
                applied,
                refused,
            })
            .collect(),
        disagreements,
    })
}

/// Sets aside what may differ between the engine's answer and `op::apply`'s: the item a
/// refusal carries where the request does not ask for it (`fifo_delete_finished`, and the
/// original's `put_item`, whose parameters are the original's) or the engine does not return
/// it (dynalite ignores `ReturnValuesOnConditionCheckFailure`).
fn normalise(step: &Step, mem: &mut Outcome, eng: &mut Outcome, ignore_refusal_items: bool) {
    if let (Outcome::Refused(m), Outcome::Refused(e)) = (&mut *mem, &mut *eng) {
        if e.is_none() || ignore_refusal_items || matches!(step, Step::FifoDeleteFinished | Step::PutItem { .. }) {
            *m = None;
            *e = None;
        }
    }
    for o in [mem, eng] {
        if let Outcome::Refused(Some(Some(r))) | Outcome::Before(Some(r)) = o {
            *r = plain(r.clone());
        }
    }
}

/// A record as compared: queue counters that are all absent are no counters, and of the write
/// time (each side's own clock) only whether it is there.
fn plain(mut r: LockRecord) -> LockRecord {
    if r.queue.as_ref().is_some_and(|q| **q == Default::default()) {
        r.queue = None;
    }
    r.lock_written_unix_ms = r.lock_written_unix_ms.map(|_| 0);
    // A semaphore's holders: in one order, and without the write time each side's clock puts
    // in their values.
    if let Some(q) = r.queue.as_mut() {
        q.holders.sort_by_key(|h| h.key);
        for h in &mut q.holders {
            h.written_unix_ms = None;
        }
    }
    r
}

/// A record as reported: guids by number.
fn show(r: &Option<LockRecord>) -> String {
    let r = r.clone().map(|mut r| {
        if let Some(GuidValue::B(b)) = &r.guid {
            if let Some(n) = guid_number(b) {
                r.guid = Some(GuidValue::S(format!("g{n}")));
            }
        }
        r
    });
    format!("{r:?}")
}

fn show_outcome(o: &Outcome) -> String {
    match o {
        Outcome::Before(r) => format!("Before({})", show(r)),
        Outcome::Refused(Some(r)) => format!("Refused({})", show(r)),
        other => format!("{other:?}"),
    }
}

/// A setting of the run from the environment `__test__/agreement.test.js` sets.
fn setting(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run through __test__/agreement.test.js"))
}

/// One line of the report: its fields separated by tabs (none of them holds a tab or a
/// line break).
fn line(fields: &[&str]) {
    println!("{}", fields.join("\t"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs an engine: __test__/agreement.test.js starts one and runs this"]
async fn engine_agrees() {
    let options = AgreementOptions {
        endpoint: setting("AGREEMENT_ENDPOINT"),
        region: setting("AGREEMENT_REGION"),
        table: setting("AGREEMENT_TABLE"),
        fifo_table: setting("AGREEMENT_FIFO_TABLE"),
        seed: setting("AGREEMENT_SEED").parse().expect("AGREEMENT_SEED"),
        steps: setting("AGREEMENT_STEPS").parse().expect("AGREEMENT_STEPS"),
        ignore_refusal_items: Some(setting("AGREEMENT_IGNORE_REFUSAL_ITEMS") == "true"),
    };
    let report = agreement_run(options).await.expect("the run");
    // The test harness's "test ... " has no line break of its own under --nocapture.
    println!();
    line(&["agreement-steps", &report.steps.to_string()]);
    for c in &report.counts {
        line(&[
            "agreement-count",
            &c.kind,
            &c.applied.to_string(),
            &c.refused.to_string(),
        ]);
    }
    for d in &report.disagreements {
        line(&[
            "agreement-disagreement",
            &d.seed.to_string(),
            &d.step.to_string(),
            &d.kind,
            &d.key,
            &d.op,
            &d.before,
            &d.engine_outcome,
            &d.memory_outcome,
            &d.engine_item,
            &d.memory_item,
        ]);
    }
}
