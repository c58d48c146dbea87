//! Which release of each trainer package a run is estimated for: the ones given (a flag, the
//! run file, the Python environment) and, for the others, the releases those imply through
//! their wheels' requirements (`contract::requires`, from each rung's METADATA). A combination
//! pip could not install is kept (it may be what the user runs) but flagged, naming the
//! requirement that forbids it; a release newer than the newest modelled one is estimated with
//! the newest rules and a warning; only one older than the oldest modelled one is refused.

use crate::contract::Stack;
use crate::contract::release::Release;
use crate::contract::requires;
use crate::run::versions::{Installed, Origin, Package, Pinned, Refused};

/// The resolved versions, and what the user should know about them.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// one per package, in `Package::ALL`'s order
    pub pins: Vec<Pinned>,
    /// releases newer than the newest modelled, combinations that cannot be installed
    pub warnings: Vec<String>,
}

/// The order unpinned packages are chosen in: each one's requirements bound the next
/// (Unsloth's `trl`, TRL's `transformers` and its `vllm` extra, vLLM's `transformers`).
const CHOICE_ORDER: [Package; 4] = [
    Package::Unsloth,
    Package::Trl,
    Package::Vllm,
    Package::Transformers,
];

/// Each package's version: the first of `given` that names it (flags before the run file),
/// else the environment's METADATA, else implied by those ([`imply`]), else the targeted
/// release. On the trl stack Unsloth is not part of the run: it neither implies nor is implied.
pub fn resolve(
    given: &[(Package, String, Origin)],
    installed: &Installed,
    stack: Stack,
) -> Result<Resolved, Refused> {
    let relevant = |p: Package| stack == Stack::Unsloth || p != Package::Unsloth;
    let mut warnings = Vec::new();
    let mut pins: Vec<Pinned> = Vec::new();
    for p in Package::ALL {
        let found = given
            .iter()
            .find(|(q, _, _)| *q == p)
            .map(|(_, text, origin)| (text.clone(), origin.clone()))
            .or_else(|| {
                installed
                    .of(p)
                    .map(|(v, path)| (v.to_string(), Origin::Environment(path.to_string())))
            });
        if let Some((text, origin)) = found {
            let version = checked(p, &text, &origin)?;
            warnings.extend(p.newer_warning(version));
            pins.push(Pinned {
                package: p,
                version,
                origin,
            });
        }
    }
    let anchors: Vec<Pinned> = pins
        .iter()
        .filter(|x| relevant(x.package))
        .cloned()
        .collect();
    for p in CHOICE_ORDER {
        if pins.iter().any(|x| x.package == p) {
            continue;
        }
        let chosen: Vec<Pinned> = pins
            .iter()
            .filter(|x| relevant(x.package))
            .cloned()
            .collect();
        let implied = (relevant(p) && !anchors.is_empty())
            .then(|| imply(p, &chosen, &anchors))
            .flatten();
        pins.push(implied.unwrap_or(Pinned {
            package: p,
            version: p.targeted(),
            origin: Origin::Default,
        }));
    }
    pins.sort_by_key(|x| Package::ALL.iter().position(|p| *p == x.package));
    let run: Vec<&Pinned> = pins.iter().filter(|x| relevant(x.package)).collect();
    warnings.extend(conflicts(&run));
    Ok(Resolved { pins, warnings })
}

/// A version given as text: refused when it is no version or older than the oldest modelled
/// release line; anything newer is taken (the warning is the caller's).
fn checked(p: Package, text: &str, origin: &Origin) -> Result<Release, Refused> {
    let refuse = |reason: String| Refused {
        package: p,
        text: text.to_string(),
        origin: origin.clone(),
        reason,
    };
    let r = Release::parse(text)
        .ok_or_else(|| refuse("expected a version such as \"0.15.2\"".to_string()))?;
    let (lo, _) = p.range();
    if r.line() < lo.line() {
        return Err(refuse(format!(
            "older than the oldest {} release grpofit models ({}; it models {})",
            p.name(),
            lo,
            p.range_text()
        )));
    }
    Ok(r)
}

/// Whether `what` at `v` goes with `other`: each one's requirement on the other takes it
/// ([`takes`]).
fn compatible(what: Package, v: Release, other: &Pinned) -> bool {
    takes((other.package, other.version), (what, v))
        && takes((what, v), (other.package, other.version))
}

/// Whether the dependent `d` takes the release `x`: its requirement (when its METADATA names
/// `x`'s package) allows it and, when `d`'s wheel was built before `x`'s, names `x`'s release
/// line or a later one: an open lower bound written before `x` existed says nothing of it
/// (unsloth 2025.8.9's `trl>=0.7.9` is no evidence it runs trl 1.16; trl 0.15.2's
/// `transformers>=4.46.0` none that it runs transformers 5).
fn takes((d, dv): (Package, Release), (x, xv): (Package, Release)) -> bool {
    let Some(spec) = requires::requirement(d.name(), dv, x.name()) else {
        return true;
    };
    if !requires::allows(spec, xv) {
        return false;
    }
    match (requires::built(d.name(), dv), requires::built(x.name(), xv)) {
        (Some(db), Some(xb)) if db < xb => requires::lines_named(spec)
            .into_iter()
            .any(|line| line >= xv.line()),
        _ => true,
    }
}

/// The release of `p` that goes with the versions already `chosen` ([`compatible`] with each):
/// the newest modelled rung. None when no modelled rung fits; the targeted release then stands
/// and [`conflicts`] says what forbids it.
fn imply(p: Package, chosen: &[Pinned], anchors: &[Pinned]) -> Option<Pinned> {
    let rungs = requires::releases(p.name());
    let version = match rungs
        .iter()
        .rev()
        .find(|c| chosen.iter().all(|q| compatible(p, **c, q)))
    {
        Some(v) => *v,
        None => of_the_era(p, &rungs, chosen)?,
    };
    let from: Vec<String> = anchors
        .iter()
        .map(|a| format!("{} {} ({})", a.package.name(), a.version, a.origin))
        .collect();
    let bounds: Vec<String> = chosen
        .iter()
        .filter_map(|q| {
            let spec = requires::requirement(q.package.name(), q.version, p.name())?;
            // a release past the modelled ones is read by the newest's METADATA: said so
            let read = requires::read_as(q.package.name(), q.version)
                .filter(|r| *r != q.version)
                .map_or(String::new(), |r| format!(" (as {r})"));
            (!spec.is_empty()).then(|| {
                format!(
                    "{} {}{read}: {}{spec}",
                    q.package.name(),
                    q.version,
                    p.name()
                )
            })
        })
        .collect();
    let bounds = if bounds.is_empty() {
        String::new()
    } else {
        format!(" ({})", bounds.join("; "))
    };
    Some(Pinned {
        package: p,
        version,
        origin: Origin::Implied(format!(
            "from {}: the newest modelled {} their requirements allow{bounds}",
            from.join(", "),
            p.name()
        )),
    })
}

/// A dependency no chosen release vouches for (each bound open, and written before it): the
/// newest rung their specifiers allow among those built by the newest chosen release's date,
/// what pip installed beside them then (unsloth 2025.8.9's `transformers>=4.51.3` with trl
/// 0.15.2's `>=4.46.0`: transformers 4.53.3). A package no chosen release requires (Unsloth
/// beside a pinned TRL) gets none: an old Unsloth's open bound on TRL says nothing of a newer
/// TRL.
fn of_the_era(p: Package, rungs: &[Release], chosen: &[Pinned]) -> Option<Release> {
    let required = chosen
        .iter()
        .any(|q| requires::requirement(q.package.name(), q.version, p.name()).is_some());
    if !required {
        return None;
    }
    let era = chosen
        .iter()
        .filter_map(|q| requires::built(q.package.name(), q.version))
        .max()?;
    let allows = |d: Package, dv: Release, x: Package, xv: Release| {
        requires::requirement(d.name(), dv, x.name()).is_none_or(|spec| requires::allows(spec, xv))
    };
    rungs
        .iter()
        .rev()
        .filter(|c| requires::built(p.name(), **c).is_some_and(|b| b <= era))
        .find(|c| {
            chosen.iter().all(|q| {
                allows(q.package, q.version, p, **c) && allows(p, **c, q.package, q.version)
            })
        })
        .copied()
}

/// One warning per requirement the combination breaks: `unsloth 2026.10.9 requires
/// trl!=0.19.0,<=1.15.0,>=0.18.2 (its METADATA): trl 1.16.0 (run file) cannot be installed
/// with it`.
fn conflicts(run: &[&Pinned]) -> Vec<String> {
    let mut out = Vec::new();
    for a in run {
        for b in run {
            if a.package == b.package {
                continue;
            }
            let Some(spec) = requires::requirement(a.package.name(), a.version, b.package.name())
            else {
                continue;
            };
            if requires::allows(spec, b.version) {
                continue;
            }
            let extra = if a.package == Package::Trl && b.package == Package::Vllm {
                "'s `vllm` extra"
            } else {
                ""
            };
            out.push(format!(
                "{} {}{extra} requires {}{spec} (its METADATA): {} {} ({}) cannot be installed with it",
                a.package.name(),
                a.version,
                b.package.name(),
                b.package.name(),
                b.version,
                b.origin
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pins(given: &[(Package, &str)], stack: Stack) -> Resolved {
        let given: Vec<(Package, String, Origin)> = given
            .iter()
            .map(|(p, v)| (*p, v.to_string(), Origin::RunFile))
            .collect();
        resolve(&given, &Installed::default(), stack).unwrap()
    }

    fn of(r: &Resolved, p: Package) -> &Pinned {
        &r.pins[Package::ALL.iter().position(|q| *q == p).unwrap()]
    }

    /// A release past the modelled ones is read by the newest's METADATA, and the implied
    /// versions' reasons say so: "trl 9.0.0 (as 1.16.0): transformers>=4.56.2", not
    /// requirements in trl 9.0.0's name that no wheel of it was read for.
    #[test]
    fn a_release_past_the_modelled_ones_names_the_metadata_read_for_it() {
        let r = pins(&[(Package::Trl, "9.0.0")], Stack::Trl);
        let newest = *requires::releases("trl").last().unwrap();
        let Origin::Implied(why) = &of(&r, Package::Transformers).origin else {
            panic!("{:?}", of(&r, Package::Transformers));
        };
        assert!(
            why.contains(&format!("trl 9.0.0 (as {newest}): transformers")),
            "{why}"
        );
        // a modelled release is its own
        let r = pins(&[(Package::Trl, &newest.to_string())], Stack::Trl);
        let Origin::Implied(why) = &of(&r, Package::Transformers).origin else {
            panic!();
        };
        assert!(
            why.contains(&format!("trl {newest}: transformers")),
            "{why}"
        );
    }

    #[test]
    fn an_old_unsloth_implies_the_trl_transformers_and_vllm_of_its_era() {
        // unsloth 2025.3.19's METADATA: `trl<=0.15.2` (and !=0.15.0), `transformers>=4.46.1`
        let r = pins(&[(Package::Unsloth, "2025.3.19")], Stack::Unsloth);
        assert_eq!(of(&r, Package::Trl).version, Release::new(0, 15, 2));
        // trl 0.15.2's `vllm` extra: `vllm==0.7.2`
        assert_eq!(of(&r, Package::Vllm).version, Release::new(0, 7, 2));
        // transformers: the newest modelled release those name (vllm 0.7.2's `>=4.48.2`;
        // 4.50.3 came after unsloth 2025.3.19's wheel, whose `>=4.46.1` cannot speak for it)
        assert_eq!(
            of(&r, Package::Transformers).version,
            Release::new(4, 48, 3)
        );
        for p in [Package::Trl, Package::Vllm, Package::Transformers] {
            let Origin::Implied(why) = &of(&r, p).origin else {
                panic!("{p:?} not implied");
            };
            assert!(why.contains("unsloth 2025.3.19 (run file)"), "{why}");
        }
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn nothing_given_keeps_the_targeted_releases() {
        let r = pins(&[], Stack::Unsloth);
        for p in Package::ALL {
            assert_eq!(of(&r, p).version, p.targeted(), "{p:?}");
            assert_eq!(of(&r, p).origin, Origin::Default);
        }
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        // the targeted TRL implies the targeted rest
        let r = pins(&[(Package::Trl, "1.15.0")], Stack::Unsloth);
        for p in [Package::Unsloth, Package::Transformers, Package::Vllm] {
            assert_eq!(of(&r, p).version, p.targeted(), "{p:?}");
        }
    }

    #[test]
    fn an_old_trl_brings_the_vllm_its_extra_installs() {
        let vllm = |trl: &str| of(&pins(&[(Package::Trl, trl)], Stack::Trl), Package::Vllm).version;
        assert_eq!(vllm("0.15.2"), Release::new(0, 7, 2));
        // trl 1.13's `vllm<=0.28.0,>=0.19.1`
        assert_eq!(vllm("1.13.0"), Release::new(0, 28, 0));
        // trl 0.14.0's extra names no vLLM release: none is implied
        let r = pins(&[(Package::Trl, "0.14.0")], Stack::Trl);
        assert_eq!(of(&r, Package::Vllm).origin, Origin::Default);
        // a vLLM the file names wins
        let r = pins(
            &[(Package::Trl, "0.15.2"), (Package::Vllm, "0.8.5")],
            Stack::Trl,
        );
        assert_eq!(of(&r, Package::Vllm).origin, Origin::RunFile);
        assert!(
            r.warnings[0].contains("trl 0.15.2's `vllm` extra requires vllm==0.7.2"),
            "{:?}",
            r.warnings
        );
    }

    #[test]
    fn newer_never_blocks_and_older_is_refused() {
        let r = pins(&[(Package::Trl, "1.99.0")], Stack::Trl);
        assert_eq!(of(&r, Package::Trl).version, Release::new(1, 99, 0));
        let newest = Package::Trl.range().1;
        assert!(
            r.warnings[0].starts_with(&format!(
                "trl 1.99.0 is newer than the newest release modelled, {newest}: estimated with {}.{}'s rules",
                newest.major, newest.minor
            )),
            "{:?}",
            r.warnings
        );
        let given = [(Package::Trl, "0.13.0".to_string(), Origin::RunFile)];
        let e = resolve(&given, &Installed::default(), Stack::Unsloth).unwrap_err();
        assert!(
            e.reason.contains("older than the oldest trl release"),
            "{}",
            e.reason
        );
        assert!(
            pins(&[(Package::Trl, "1.15.3")], Stack::Trl)
                .warnings
                .is_empty()
        );
    }

    #[test]
    fn a_combination_pip_refuses_names_the_requirement() {
        let r = pins(
            &[(Package::Unsloth, "2025.3.19"), (Package::Trl, "1.15.0")],
            Stack::Unsloth,
        );
        assert!(
            r.warnings
                .iter()
                .any(|w| w.starts_with("unsloth 2025.3.19 requires trl")
                    && w.contains("<=0.15.2")
                    && w.contains("trl 1.15.0 (run file) cannot be installed with it")),
            "{:?}",
            r.warnings
        );
        // trl 1.16.0 alone on the unsloth stack: no modelled Unsloth takes it (2026.10.9's
        // `trl<=1.15.0`; the older ones' `trl>=0.7.9` predate it), so the targeted one stays,
        // flagged
        let r = pins(&[(Package::Trl, "1.16.0")], Stack::Unsloth);
        assert_eq!(of(&r, Package::Unsloth).origin, Origin::Default);
        assert!(
            r.warnings
                .iter()
                .any(|w| w.contains("unsloth 2026.10.9 requires trl")),
            "{:?}",
            r.warnings
        );
        // trl 0.15.2 alone: the newest Unsloth whose requirements take it, and the newest
        // transformers both allow that was out when that Unsloth was built
        let r = pins(&[(Package::Trl, "0.15.2")], Stack::Unsloth);
        assert_eq!(of(&r, Package::Unsloth).version, Release::new(2025, 8, 9));
        assert_eq!(
            of(&r, Package::Transformers).version,
            Release::new(4, 53, 3)
        );
        // the trl stack runs no Unsloth: nothing to say about it
        let r = pins(&[(Package::Trl, "0.15.2")], Stack::Trl);
        assert_eq!(of(&r, Package::Unsloth).origin, Origin::Default);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn the_first_given_wins_then_the_environment() {
        let env = Installed {
            found: vec![
                (
                    Package::Trl,
                    "0.19.1".into(),
                    "/venv/trl.dist-info/METADATA".into(),
                ),
                (
                    Package::Vllm,
                    "0.8.5.post1".into(),
                    "/venv/vllm.dist-info/METADATA".into(),
                ),
            ],
        };
        let given = [
            (
                Package::Vllm,
                "0.10.1".to_string(),
                Origin::CommandLine("--vllm-version".into()),
            ),
            (Package::Vllm, "0.9.0".to_string(), Origin::RunFile),
        ];
        let r = resolve(&given, &env, Stack::Unsloth).unwrap();
        assert_eq!(of(&r, Package::Trl).version, Release::new(0, 19, 1));
        assert!(matches!(
            of(&r, Package::Trl).origin,
            Origin::Environment(_)
        ));
        assert_eq!(of(&r, Package::Vllm).version, Release::new(0, 10, 1));
        assert_eq!(
            of(&r, Package::Vllm).origin,
            Origin::CommandLine("--vllm-version".into())
        );
        // trl 0.19.1 brings the newest Unsloth whose requirements take it (2026.10.9's
        // `trl!=0.19.0,<=1.15.0,>=0.18.2`)
        assert_eq!(of(&r, Package::Unsloth).version, Release::new(2026, 10, 9));
    }
}
