//! `gpu-bench`: runs the benchmarks and writes BENCHMARKS.md (`make bench`).
//!
//! ```text
//! gpu-bench [--out BENCHMARKS.md] [--quick] [--skip-pools] [--skip-profiles]
//!           [--sizes 100,1000,10000,50000] [--policies gpu-labels-policy,...]
//! gpu-bench generate --pods N --dir DIR     (a synthetic pool and its kwctl replay session)
//! gpu-bench native-loop POLICY SECONDS      (the policy's requests natively, for perf record)
//! gpu-bench pool-loop PODS SECONDS [VARIANT] (one capacity decision natively, for perf record)
//! gpu-bench teams [--quick] [--out FILE]    (namespace quotas and a team budget of 50 namespaces)
//! gpu-bench guest-work [--out FILE | --print] (wasm instructions per validate, wasmi fuel)
//! gpu-bench wasm-loop MODULE REQUEST SETTINGS CALLS [FRESH_CALLS [SESSION]] (validate on one kept wasmtime instance,
//!                                                  for callgrind: bench/x86_count.py)
//! ```
//!
//! Expects the built modules (`make build`, plus `naive-capacity-gate` for the pool
//! benchmark) in cargo's target directory, `wasm32-wasip1/release` (or `$GPU_ADMISSION_WASM_DIR`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use gpu_bench::cases::{self, CASES, Case, Outcome};
use gpu_bench::guest_work;
use gpu_bench::machine::{self, Machine};
use gpu_bench::native;
use gpu_bench::pools::{self, SIZES, Setup};
use gpu_bench::profiles::{self, VARIANTS};
use gpu_bench::report::{self, ModuleRow, ProfileRow, Results, VariantPolicy};
use gpu_bench::stats::{Plan, Summary, fmt_bytes, fmt_duration, measure};
use gpu_bench::wasm::{self, Plans};
use gpu_e2e::{Policy, module_path, workspace_root};

/// Guest call limit for the pool benchmark.
const POOL_TIMEOUT: Duration = Duration::from_secs(600);

const USAGE: &str = "usage: gpu-bench [--out FILE] [--quick] [--skip-pools] [--skip-profiles] [--sizes N,N,...] [--policies a,b,...]";

#[derive(Debug, Default)]
struct Args {
    out: Option<PathBuf>,
    quick: bool,
    skip_pools: bool,
    skip_profiles: bool,
    sizes: Option<Vec<usize>>,
    policies: Option<Vec<String>>,
}

fn parse_args(args: &[String]) -> Result<Args> {
    let mut parsed = Args::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |flag: &str| {
            it.next()
                .cloned()
                .with_context(|| format!("{flag} needs a value; {USAGE}"))
        };
        match arg.as_str() {
            "--out" | "-o" => parsed.out = Some(PathBuf::from(value(arg)?)),
            "--quick" => parsed.quick = true,
            "--skip-pools" => parsed.skip_pools = true,
            "--skip-profiles" => parsed.skip_profiles = true,
            "--sizes" => {
                let sizes = value(arg)?
                    .split(',')
                    .map(|s| s.trim().replace('_', "").parse::<usize>())
                    .collect::<Result<Vec<_>, _>>()
                    .with_context(|| format!("--sizes takes numbers; {USAGE}"))?;
                if sizes.contains(&0) {
                    bail!("--sizes: a pool needs at least one pod");
                }
                parsed.sizes = Some(sizes);
            }
            "--policies" => {
                parsed.policies = Some(
                    value(arg)?
                        .split(',')
                        .map(|s| s.trim().to_string())
                        .collect(),
                )
            }
            "-h" | "--help" => bail!("{USAGE}"),
            other => bail!("unknown argument {other:?}; {USAGE}"),
        }
    }
    Ok(parsed)
}

fn progress(text: impl AsRef<str>) {
    eprintln!("gpu-bench: {}", text.as_ref());
}

/// Measures one policy's module and requests.
fn bench_policy(root: &Path, policy: &str, plans: &Plans) -> Result<ModuleRow> {
    let path = module_path(policy)?;
    let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let (loaded, times) = wasm::module_times(&path, &bytes, plans)?;
    progress(format!(
        "{policy}: {} raw, compile {}, instantiate {}",
        fmt_bytes(bytes.len() as u64),
        fmt_duration(times.compile.median),
        fmt_duration(times.instantiate.median)
    ));
    let annotated =
        std::fs::metadata(cases::policy_dir(root, policy).join("annotated-policy.wasm"))
            .ok()
            .map(|m| m.len());
    let mut results = Vec::new();
    for case in CASES.iter().filter(|c| c.policy == policy) {
        let case = cases::load(root, case)?;
        let result = wasm::measure_case(&loaded, policy, &case, plans)
            .with_context(|| format!("{policy}: {}", case.name()))?;
        progress(format!(
            "  {} ({}): guest call {} (p99 {}), fresh {}, native {}",
            result.name,
            result.observed.as_str(),
            fmt_duration(result.warm_call.median),
            fmt_duration(result.warm_call.p99),
            fmt_duration(result.fresh_validate.median),
            result.native.map_or("-".into(), |n| fmt_duration(n.median)),
        ));
        for note in &result.notes {
            progress(format!("    NOTE {note}"));
        }
        results.push(result);
    }
    Ok(ModuleRow {
        policy: policy.to_string(),
        raw: bytes.len() as u64,
        annotated,
        times,
        cases: results,
    })
}

/// The capacity gate over synthetic pools.
/// The capacity gate over synthetic pools; a size or variant that fails is reported
/// (in `failures`) and the others still run.
fn bench_pools(
    root: &Path,
    sizes: &[usize],
    factor: f64,
    failures: &mut Vec<String>,
) -> Result<Vec<pools::PoolRow>> {
    // The naive baseline takes more than the harness's default 10 s on the largest pools.
    let gate = Policy::load(module_path("gpu-capacity-gate-policy")?)?.with_timeout(POOL_TIMEOUT);
    let naive_path = module_path(native::NAIVE_CAPACITY).context(
        "the naive baseline module: cargo build --release --target wasm32-wasip1 -p naive-capacity-gate",
    )?;
    let naive = Policy::load(naive_path)?.with_timeout(POOL_TIMEOUT);
    let setup = Setup::new(root, gate, naive)?;
    let mut rows = Vec::new();
    for &n in sizes {
        let started = Instant::now();
        let data = pools::generate(n);
        progress(format!(
            "pool of {n} pods, {} nodes: generated in {} ({} masked, {} whole)",
            data.nodes,
            fmt_duration(started.elapsed()),
            fmt_bytes(data.bytes(true)),
            fmt_bytes(data.bytes(false))
        ));
        for variant in pools::Variant::ALL {
            let row = match pools::measure_pool(&setup, &data, variant, &pools::plan(n, factor)) {
                Ok(row) => row,
                Err(e) => {
                    let why = format!("pool of {n} pods, {}: {e:#}", variant.short());
                    progress(format!("  FAILED {why}"));
                    failures.push(why);
                    continue;
                }
            };
            progress(format!(
                "  {}: wasm kept {} (p99 {}), fresh {}, native {}",
                variant.short(),
                fmt_duration(row.wasm_warm.median),
                fmt_duration(row.wasm_warm.p99),
                fmt_duration(row.wasm_fresh.median),
                fmt_duration(row.native.median)
            ));
            rows.push(row);
        }
    }
    Ok(rows)
}

/// The request each policy is measured on in the profile experiment: its first
/// Deployment that is not denied, or, for a policy that admits no Deployments (the
/// autoscaler policy), its first case that is not denied.
fn profile_case(policy: &str) -> Option<&'static Case> {
    let allowed = |c: &&Case| c.policy == policy && c.intent != Outcome::Deny;
    CASES
        .iter()
        .filter(allowed)
        .find(|c| c.kind.starts_with("Deployment"))
        .or_else(|| CASES.iter().find(allowed))
}

/// One policy built one way, compiled and ready to measure.
struct Candidate {
    policy: Policy,
    size: u64,
    compile: Duration,
    /// One summary per timing round.
    warm: Vec<Summary>,
    fresh: Vec<Summary>,
    same_answer: bool,
}

/// The round with the lowest median: with other work on the machine coming and going,
/// the quietest round is the best estimate of the module's own speed.
fn best_round(rounds: Vec<Summary>) -> Option<Summary> {
    rounds.into_iter().min_by_key(|s| s.median)
}

/// A variant's label, build time and per-policy candidates (or why there is none).
type BuiltVariant = (String, Duration, Vec<(String, Result<Candidate, String>)>);

/// The experiment's rows, and the request measured per policy (policy, request name).
type ProfileResults = (Vec<ProfileRow>, Vec<(String, String)>);

/// Timing rounds over all variants, each variant's best round reported: a slow spell of
/// the machine then costs one round, not a variant's whole measurement.
const PROFILE_ROUNDS: usize = 3;

fn bench_profiles(root: &Path, policies: &[String], factor: f64) -> Result<ProfileResults> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let wasm_opt = profiles::have_wasm_opt();
    let mut chosen = Vec::new();
    for p in policies {
        if let Some(case) = profile_case(p) {
            chosen.push((p.clone(), cases::load(root, case)?));
        }
    }
    let names: Vec<String> = chosen.iter().map(|(p, _)| p.clone()).collect();
    let shipped = profiles::release_profile(
        &std::fs::read_to_string(root.join("Cargo.toml")).context("the root Cargo.toml")?,
    );

    // Build (or find up to date) and compile every variant first.
    let mut variants: Vec<BuiltVariant> = Vec::new();
    for variant in VARIANTS {
        let label = if matches!(variant.base, profiles::Base::Shipped) && variant.wasm_opt.is_none()
        {
            format!("shipped: {}", shipped.join(", "))
        } else {
            variant.label.to_string()
        };
        if variant.wasm_opt.is_some() && !wasm_opt {
            let why = "wasm-opt is not installed (apt-get install binaryen)".to_string();
            let modules = names
                .iter()
                .map(|p| (p.clone(), Err(why.clone())))
                .collect();
            variants.push((label, Duration::ZERO, modules));
            continue;
        }
        progress(format!("profile variant: {label}"));
        let built = profiles::build(root, &cargo, variant, &names)?;
        let modules = built
            .modules
            .into_iter()
            .map(|(policy, module)| {
                let candidate = module.and_then(|path| {
                    let bytes =
                        std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                    let (loaded, compiles) =
                        wasm::load_module(&path, &bytes, 1).map_err(|e| format!("{e:#}"))?;
                    Ok(Candidate {
                        policy: loaded,
                        size: bytes.len() as u64,
                        compile: compiles.iter().sum(),
                        warm: Vec::new(),
                        fresh: Vec::new(),
                        same_answer: true,
                    })
                });
                (policy, candidate)
            })
            .collect();
        variants.push((label, built.build_time, modules));
    }

    // The shipped answers, to compare every variant's with.
    let mut shipped_answers = Vec::new();
    for (i, (_, case)) in chosen.iter().enumerate() {
        let answer = match variants.first().and_then(|v| v.2.get(i)) {
            Some((_, Ok(c))) => Some(c.policy.instantiate()?.call(
                "validate",
                &case.payload,
                case.session.clone(),
            )?),
            _ => None,
        };
        shipped_answers.push(answer);
    }

    let warm = Plan::thousands(2_000 / PROFILE_ROUNDS).scaled(factor);
    let fresh = Plan::thousands(500 / PROFILE_ROUNDS).scaled(factor);
    for round in 0..PROFILE_ROUNDS {
        progress(format!(
            "profile variants: timing round {} of {PROFILE_ROUNDS}",
            round + 1
        ));
        let n = variants.len();
        for k in 0..n {
            let (_, _, modules) = &mut variants[(k + round * n / PROFILE_ROUNDS) % n];
            for (i, (_, candidate)) in modules.iter_mut().enumerate() {
                let (Ok(c), Some((_, case))) = (candidate.as_mut(), chosen.get(i)) else {
                    continue;
                };
                let instance = c.policy.instantiate()?;
                let answer = instance.call("validate", &case.payload, case.session.clone())?;
                if let Some(Some(shipped)) = shipped_answers.get(i) {
                    c.same_answer &= wasm::same_answer(shipped, &answer);
                }
                c.warm.push(measure(
                    &warm,
                    || case.session.clone(),
                    |s| instance.call("validate", &case.payload, s).map(drop),
                )?);
                let policy = &c.policy;
                c.fresh.push(measure(
                    &fresh,
                    || case.session.clone(),
                    |s| policy.validate(&case.request, &case.settings, s).map(drop),
                )?);
            }
        }
    }

    let rows = variants
        .into_iter()
        .map(|(label, build_time, modules)| ProfileRow {
            label,
            build_time,
            policies: modules
                .into_iter()
                .map(|(policy, candidate)| {
                    let measured = candidate.and_then(|c| {
                        Ok(VariantPolicy {
                            size: c.size,
                            compile: c.compile,
                            warm: best_round(c.warm).ok_or("not timed")?,
                            fresh: best_round(c.fresh).ok_or("not timed")?,
                            same_answer: c.same_answer,
                        })
                    });
                    (policy, measured)
                })
                .collect(),
        })
        .collect::<Vec<_>>();
    for row in &rows {
        let line: Vec<String> = row
            .policies
            .iter()
            .map(|(p, m)| match m {
                Ok(v) => format!(
                    "{p} {} kept {}",
                    fmt_bytes(v.size),
                    fmt_duration(v.warm.median)
                ),
                Err(e) => format!("{p}: {e}"),
            })
            .collect();
        progress(format!("  {}: {}", row.label, line.join("; ")));
    }
    let described = chosen.iter().map(|(p, c)| (p.clone(), c.name())).collect();
    Ok((rows, described))
}

/// The command that produced the report, as Markdown.
fn command_line(args: &[String]) -> String {
    let mut words = vec!["gpu-bench".to_string()];
    words.extend(args.iter().cloned());
    let direct = words.join(" ");
    if std::env::var_os("MAKELEVEL").is_some() {
        format!("`make bench` (runs `{direct}`)")
    } else {
        format!("`{direct}`")
    }
}

/// `gpu-bench teams [--quick] [--out BENCHMARKS.md]`: the capacity gate's namespace quotas
/// and a team budget of 50 namespaces with 2,000 GPU pods (label list vs per-namespace
/// lists), as a Markdown section: printed, or put between its markers in the `--out` file
/// (appended when absent; `make bench` runs it after the main report).
fn teams(args: &[String]) -> Result<()> {
    const USAGE: &str = "usage: gpu-bench teams [--quick] [--out FILE]";
    let (mut quick, mut out) = (false, None);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--out" | "-o" => out = Some(PathBuf::from(it.next().context(USAGE)?)),
            _ => bail!(USAGE),
        }
    }
    let root = workspace_root();
    let gate = Policy::load(module_path("gpu-capacity-gate-policy")?)?.with_timeout(POOL_TIMEOUT);
    let rows = gpu_bench::teams::measure_teams(&root, &gate, &gpu_bench::teams::plan(quick))?;
    let base = rows.first().map(|r| r.wasm.median);
    let mut md = String::new();
    md.push_str(TEAMS_BEGIN);
    md.push_str("\n## Capacity gate: namespace quotas and team budgets\n\n");
    md.push_str(&format!(
        "`gpu-bench teams`: one decision of the gate (`test_data/deployment_a100_4x2.json`, 4 x 2 GPUs, into pool \
         a100 of `test_data/settings.yml`: 100 pods on 25 nodes) for a team of {} namespaces holding {} GPU pods, \
         one GPU each, half of them in pool a100 (the benchmark's whole pods masked \
         with the gate's Pod masks; metadata is never masked), in wasm through the harness (kept instance) and \
         natively. Host calls answered from memory: the host's own cost (policy-server's watch cache) is not in \
         these numbers.\n\n",
        gpu_bench::teams::NAMESPACES,
        gpu_bench::teams::TEAM_PODS
    ));
    md.push_str("| decision | host calls | bytes in | wasm median | wasm p99 | over pools only (wasm) | native median |\n");
    md.push_str("|---|---|---|---|---|---|---|\n");
    for r in &rows {
        let over = base
            .map(|w| fmt_duration(r.wasm.median.saturating_sub(w)))
            .unwrap_or_default();
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | +{} | {} |\n",
            r.variant.label(),
            r.calls,
            fmt_bytes(r.bytes),
            fmt_duration(r.wasm.median),
            fmt_duration(r.wasm.p99),
            over,
            fmt_duration(r.native.median)
        ));
    }
    md.push_str(TEAMS_END);
    md.push('\n');
    match out {
        None => print!("{md}"),
        Some(path) => {
            let old = std::fs::read_to_string(&path).unwrap_or_default();
            let new = report::put_section(&old, TEAMS_BEGIN, TEAMS_END, &md)
                .with_context(|| path.display().to_string())?;
            std::fs::write(&path, new)
                .with_context(|| format!("cannot write {}", path.display()))?;
            progress(format!("teams: wrote {}", path.display()));
        }
    }
    Ok(())
}

const TEAMS_BEGIN: &str = "<!-- capacity-teams:begin -->";
const TEAMS_END: &str = "<!-- capacity-teams:end -->";

/// `gpu-bench guest-work [--out BENCHMARKS.md | --print]`: wasm instructions per `validate`
/// (wasmi's fuel) of the static policies' requests, and of Kubewarden's policies when
/// KUBEWARDEN_LABELS_POLICY / KUBEWARDEN_MUTATING_POLICY name their modules, as a Markdown section
/// put between its markers in the `--out` file (default: BENCHMARKS.md at the workspace root;
/// appended when absent), or printed.
fn guest_work(args: &[String]) -> Result<()> {
    const USAGE: &str = "usage: gpu-bench guest-work [--out FILE | --print]";
    let root = workspace_root();
    let (mut out, mut print) = (None, false);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--out" | "-o" => out = Some(PathBuf::from(it.next().context(USAGE)?)),
            "--print" => print = true,
            _ => bail!(USAGE),
        }
    }
    if print && out.is_some() {
        bail!("--out and --print exclude each other; {USAGE}");
    }
    let report = guest_work::run(&root, &|line| progress(format!("guest-work: {line}")))?;
    // Kubewarden's modules as they were named, for the command to rerun.
    let shared = guest_work::KubewardenPolicies::shared()?;
    let mut words: Vec<String> = [&shared.labels, &shared.mutating]
        .into_iter()
        .filter_map(|p| {
            let value = std::env::var(&p.env).ok().filter(|v| !v.is_empty())?;
            Some(format!("{}={value}", p.env))
        })
        .collect();
    words.push("gpu-bench".into());
    words.push("guest-work".into());
    words.extend(args.iter().cloned());
    let md = report.markdown(&words.join(" "));
    if print {
        print!("{md}");
        return Ok(());
    }
    let path = out.unwrap_or_else(|| root.join("BENCHMARKS.md"));
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let new = report::put_section(&old, guest_work::BEGIN, guest_work::END, &md)
        .with_context(|| path.display().to_string())?;
    std::fs::write(&path, new).with_context(|| format!("cannot write {}", path.display()))?;
    progress(format!(
        "guest-work: {} requests; wrote {}",
        report.rows.len(),
        path.display()
    ));
    Ok(())
}

/// `gpu-bench generate --pods N --dir DIR`: writes a synthetic pool (whole and masked
/// Node and Pod lists) and a kwctl replay session answering the capacity gate's two
/// calls with the masked lists, for `kwctl run` on the gate's
/// `test_data/deployment_a100_4x2.json` and `settings.yml`.
fn generate(args: &[String]) -> Result<()> {
    let (mut pods, mut dir) = (None, None);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--pods" => {
                pods = it
                    .next()
                    .and_then(|v| v.replace('_', "").parse::<usize>().ok())
            }
            "--dir" => dir = it.next().map(PathBuf::from),
            other => {
                bail!("unknown argument {other:?}; usage: gpu-bench generate --pods N --dir DIR")
            }
        }
    }
    let (Some(pods), Some(dir)) = (pods.filter(|n| *n > 0), dir) else {
        bail!("usage: gpu-bench generate --pods N --dir DIR");
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let data = pools::generate(pods);
    let root = workspace_root();
    let settings: gpu_rules::capacity::Settings = serde_json::from_value(gpu_e2e::read_settings(
        root.join("policies/gpu-capacity-gate-policy/test_data/settings.yml"),
    )?)?;
    let Some(pool) = settings
        .pools
        .iter()
        .find(|p| p.name == gpu_bench::synth::POOL)
    else {
        bail!(
            "the gate's settings.yml has no pool {}",
            gpu_bench::synth::POOL
        );
    };
    let session = gpu_bench::synth::session(&[
        (
            gpu_rules::pools::nodes::node_query(pool),
            &data.nodes_masked,
        ),
        (
            gpu_rules::capacity::queries::pod_query(&settings.pool_label_key, pool),
            &data.pods_masked,
        ),
    ])?;
    let session = session.to_yaml_string()?;
    let files: [(&str, &[u8]); 5] = [
        ("nodes.json", &data.nodes_full),
        ("nodes_masked.json", &data.nodes_masked),
        ("pods.json", &data.pods_full),
        ("pods_masked.json", &data.pods_masked),
        ("session_masked.yml", session.as_bytes()),
    ];
    for (name, bytes) in files {
        let path = dir.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        progress(format!(
            "wrote {} ({})",
            path.display(),
            fmt_bytes(bytes.len() as u64)
        ));
    }
    Ok(())
}

/// `gpu-bench native-loop POLICY SECONDS`: the policy's requests, natively, in a loop:
/// something to run under `perf record` (the wasm runs are mostly JIT frames).
fn native_loop(args: &[String]) -> Result<()> {
    let [policy, seconds] = args else {
        bail!("usage: gpu-bench native-loop POLICY SECONDS");
    };
    let seconds: f64 = seconds.parse().context("SECONDS")?;
    let root = workspace_root();
    let loaded = CASES
        .iter()
        .filter(|c| c.policy == policy)
        .map(|c| cases::load(&root, c))
        .collect::<Result<Vec<_>>>()?;
    if loaded.is_empty() {
        bail!("no cases for {policy}");
    }
    let started = Instant::now();
    let mut calls = 0u64;
    while started.elapsed().as_secs_f64() < seconds {
        for case in &loaded {
            native::validate(policy, &case.payload, case.session.clone())?;
            calls += 1;
        }
    }
    progress(format!(
        "{calls} native calls, {} each on average",
        fmt_duration(started.elapsed() / calls.max(1) as u32)
    ));
    Ok(())
}

/// `gpu-bench wasm-loop MODULE REQUEST SETTINGS CALLS [FRESH_CALLS [SESSION]]`: `validate` of the module
/// (any waPC policy, annotated or not) on the AdmissionRequest in REQUEST with the settings in
/// SETTINGS (JSON or YAML; `-` for `{}`), once and then CALLS times on the same wasmtime
/// instance, as `kwctl bench` does; then FRESH_CALLS times (default 0) each on a fresh instance,
/// as policy-server does (instantiation included). With SESSION (a kwctl replay session), every
/// call's host calls are answered from a copy of it (the copy is counted in the loops, the same for
/// every module). The answer goes to stderr. The two loops are
/// [`calls_on`] and [`fresh_calls_on`], so callgrind can count each alone (`--toggle-collect`,
/// `--dump-after`): see `bench/x86_count.py`.
fn wasm_loop(args: &[String]) -> Result<()> {
    let (module, request, settings, calls, fresh_calls, session) = match args {
        [m, r, s, c] => (m, r, s, c, "0", None),
        [m, r, s, c, f] => (m, r, s, c, f.as_str(), None),
        [m, r, s, c, f, session] => (m, r, s, c, f.as_str(), Some(session)),
        _ => bail!(
            "usage: gpu-bench wasm-loop MODULE REQUEST SETTINGS CALLS [FRESH_CALLS [SESSION]]"
        ),
    };
    let session = session.map(gpu_e2e::ReplaySession::from_file).transpose()?;
    let calls: u64 = calls.parse().context("CALLS: a number of calls")?;
    let fresh_calls: u64 = fresh_calls
        .parse()
        .context("FRESH_CALLS: a number of calls")?;
    let request = gpu_e2e::read_admission_request(request)?;
    let settings = match settings.as_str() {
        "-" => serde_json::json!({}),
        path => gpu_e2e::read_settings(path)?,
    };
    let payload = cases::validate_payload(&request, &settings)?;
    let policy = Policy::load(module)?;
    let instance = policy.instantiate()?;
    let first = instance.call("validate", &payload, session.clone())?;
    eprintln!("{}", String::from_utf8_lossy(&first));
    calls_on(&instance, &payload, calls, session.as_ref())?;
    if fresh_calls > 0 {
        // The same verdict (Kubewarden's policies may list things in another order).
        let accepted = |answer: &[u8]| {
            serde_json::from_slice::<serde_json::Value>(answer)
                .ok()
                .and_then(|v| v["accepted"].as_bool())
        };
        let fresh = fresh_call(&policy, &payload, session.as_ref())?;
        if accepted(&fresh) != accepted(&first) {
            bail!(
                "a fresh instance answered {} where the kept one answered {}",
                String::from_utf8_lossy(&fresh),
                String::from_utf8_lossy(&first)
            );
        }
    }
    fresh_calls_on(&policy, &payload, fresh_calls, session.as_ref())
}

/// `calls` calls of `validate` on `instance`, each of which must succeed.
#[inline(never)]
fn calls_on(
    instance: &gpu_e2e::Instance,
    payload: &[u8],
    calls: u64,
    session: Option<&gpu_e2e::ReplaySession>,
) -> Result<()> {
    for _ in 0..calls {
        std::hint::black_box(instance.call("validate", payload, session.cloned())?);
    }
    Ok(())
}

/// `calls` calls of `validate`, each on a fresh instance of `policy`, each of which must succeed.
#[inline(never)]
fn fresh_calls_on(
    policy: &Policy,
    payload: &[u8],
    calls: u64,
    session: Option<&gpu_e2e::ReplaySession>,
) -> Result<()> {
    for _ in 0..calls {
        std::hint::black_box(fresh_call(policy, payload, session)?);
    }
    Ok(())
}

/// `validate` on a fresh instance of `policy`, its host calls answered from a copy of
/// `session`.
fn fresh_call(
    policy: &Policy,
    payload: &[u8],
    session: Option<&gpu_e2e::ReplaySession>,
) -> Result<Vec<u8>> {
    match session {
        None => policy.call("validate", payload),
        Some(s) => policy.call_replayed("validate", payload, s.clone()),
    }
}

/// `gpu-bench pool-loop PODS SECONDS [masked|distinct|unmasked|naive]`: one capacity decision over
/// a synthetic pool, natively, in a loop (for `perf record`).
fn pool_loop(args: &[String]) -> Result<()> {
    let (pods, seconds, variant) = match args {
        [p, s] => (p, s, "masked"),
        [p, s, v] => (p, s, v.as_str()),
        _ => bail!("usage: gpu-bench pool-loop PODS SECONDS [masked|distinct|unmasked|naive]"),
    };
    let pods: usize = pods.replace('_', "").parse().context("PODS")?;
    let seconds: f64 = seconds.parse().context("SECONDS")?;
    let variant = match pools::Variant::ALL
        .into_iter()
        .find(|v| v.short() == variant)
    {
        Some(v) => v,
        None => bail!("unknown variant {variant}: masked, distinct, unmasked or naive"),
    };
    let root = workspace_root();
    let gate = Policy::load(module_path("gpu-capacity-gate-policy")?)?;
    let setup = Setup::new(&root, gate.clone(), gate)?;
    let data = pools::generate(pods);
    let session = setup.session(variant, &data)?;
    let module = match variant {
        pools::Variant::Naive => native::NAIVE_CAPACITY,
        _ => "gpu-capacity-gate-policy",
    };
    let (started, mut calls) = (Instant::now(), 0u32);
    let mut busy = Duration::ZERO;
    while started.elapsed().as_secs_f64() < seconds {
        let s = session.clone();
        let t = Instant::now();
        native::validate(module, &setup.payload, Some(s))?;
        busy += t.elapsed();
        calls += 1;
    }
    progress(format!(
        "{calls} decisions over {pods} pods ({}), {} each",
        variant.short(),
        fmt_duration(busy / calls.max(1))
    ));
    Ok(())
}

fn run(args: &[String]) -> Result<()> {
    match args.first().map(String::as_str) {
        Some("generate") => return generate(&args[1..]),
        Some("native-loop") => return native_loop(&args[1..]),
        Some("pool-loop") => return pool_loop(&args[1..]),
        Some("teams") => return teams(&args[1..]),
        Some("guest-work") => return guest_work(&args[1..]),
        Some("wasm-loop") => return wasm_loop(&args[1..]),
        _ => {}
    }
    let opts = parse_args(args)?;
    let started = Instant::now();
    let root = workspace_root();
    let factor = if opts.quick { 0.1 } else { 1.0 };
    let plans = Plans::full().scaled(factor);
    let machine = Machine::probe(&root);
    let (load_start, builds_start) = (machine::load_average(), machine::other_builds());
    let date = machine::utc_now();

    let mut policies = gpu_e2e::policy_names(&root)?;
    if let Some(only) = &opts.policies {
        policies.retain(|p| only.contains(p));
    }
    let mut modules = Vec::new();
    for policy in &policies {
        modules.push(bench_policy(&root, policy, &plans)?);
    }

    let (pool_rows, pools_skipped) = if opts.skip_pools {
        (Vec::new(), Some("`--skip-pools`".to_string()))
    } else if !policies.iter().any(|p| p == "gpu-capacity-gate-policy") {
        (
            Vec::new(),
            Some("gpu-capacity-gate-policy not selected".to_string()),
        )
    } else {
        let sizes = opts.sizes.clone().unwrap_or_else(|| SIZES.to_vec());
        let mut failures = Vec::new();
        let rows = bench_pools(&root, &sizes, factor, &mut failures)?;
        let failed = (!failures.is_empty()).then(|| format!("failed: {}", failures.join("; ")));
        (rows, failed)
    };

    let (profile_rows, profile_case, profiles_skipped) = if opts.skip_profiles {
        (
            Vec::new(),
            Vec::new(),
            Some("`--skip-profiles`".to_string()),
        )
    } else {
        let (rows, cases) = bench_profiles(&root, &policies, factor)?;
        (rows, cases, None)
    };

    let results = Results {
        machine,
        started: date,
        elapsed: started.elapsed(),
        command: command_line(args),
        load_start,
        load_end: machine::load_average(),
        builds_start,
        builds_end: machine::other_builds(),
        quick: opts.quick,
        modules,
        pools: pool_rows,
        pools_skipped,
        profiles: profile_rows,
        profile_case,
        profiles_skipped,
    };
    let markdown = results.markdown();
    match &opts.out {
        Some(path) => {
            // The sections the other steps of `make bench` write stay until they replace them.
            let old = std::fs::read_to_string(path).unwrap_or_default();
            let markdown = report::keep_marked_sections(&markdown, &old);
            std::fs::write(path, &markdown)
                .with_context(|| format!("cannot write {}", path.display()))?;
            progress(format!(
                "wrote {} in {}",
                path.display(),
                fmt_duration(started.elapsed())
            ));
        }
        None => print!("{markdown}"),
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpu-bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn arguments() {
        let a = parse_args(&args(&["--out", "B.md", "--quick", "--sizes", "100,1_000"])).unwrap();
        assert_eq!(a.out, Some(PathBuf::from("B.md")));
        assert!(a.quick && !a.skip_profiles);
        assert_eq!(a.sizes, Some(vec![100, 1000]));
        assert!(parse_args(&args(&["--sizes", "0"])).is_err());
        assert!(parse_args(&args(&["--out"])).is_err());
        assert!(parse_args(&args(&["--frobnicate"])).is_err());
    }

    #[test]
    fn every_policy_with_cases_has_a_profile_case() {
        for case in CASES {
            assert!(profile_case(case.policy).is_some(), "{}", case.policy);
        }
    }
}
