//! Resource transformations, in the shape of Kueue's
//! `resources.transformations`: a requested resource also counts, for
//! quota, fair sharing and budgets, as other resources times a factor. The
//! usual one turns MIG slices into GPU-equivalents:
//!
//! ```yaml
//! - input: nvidia.com/mig-1g.10gb
//!   strategy: Replace           # quota is charged the outputs only
//!   outputs:
//!     sluice.dev/gpu-equivalent: 1/7
//!     example.com/gpu-memory: 10Gi
//! - input: nvidia.com/gpu
//!   strategy: Retain            # quota is charged the GPU and its equivalent
//!   outputs:
//!     sluice.dev/gpu-equivalent: "1"
//! ```
//!
//! A factor is a Kubernetes quantity (`1`, `0.25`, `10Gi`) or a fraction of
//! two whole numbers (`1/7`); it is the amount of the output per unit of
//! the input. The controller takes the list as a flag
//! (`--resource-transformations`), the chart as a value, the simulator in
//! its scenario file; all three read it here.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::quantity;
use crate::validation::{Violation, Violations};

/// One transformation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceTransformation {
    /// The requested resource, e.g. `nvidia.com/mig-1g.10gb`.
    pub input: String,
    /// `Retain` (Kueue's default): quota is also charged the input.
    /// `Replace`: quota is charged the outputs only. Nodes are always
    /// checked against the input.
    #[serde(default)]
    pub strategy: Strategy,
    /// Output resource → amount per unit of input: a quantity (`10Gi`,
    /// `0.25`) or a fraction (`1/7`). None with `Replace`: the input is
    /// not charged at all (Kueue's way to ignore a resource).
    #[serde(default)]
    pub outputs: BTreeMap<String, String>,
}

/// What a transformation does with its input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub enum Strategy {
    /// Quota is charged the input and the outputs.
    #[default]
    Retain,
    /// Quota is charged the outputs only.
    Replace,
}

/// An exact factor in whole units: `num / den` of the output per unit of
/// the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Factor {
    /// Numerator, positive.
    pub num: i128,
    /// Denominator, positive.
    pub den: i128,
}

impl Factor {
    /// Engine units of `output` per engine unit of `input`
    /// ([`quantity::units_per_whole`]), reduced.
    pub fn per_engine_unit(self, input: &str, output: &str) -> (i128, i128) {
        let num = self.num * quantity::units_per_whole(output);
        let den = self.den * quantity::units_per_whole(input);
        let g = gcd(num, den);
        (num / g, den / g)
    }
}

fn gcd(a: i128, b: i128) -> i128 {
    let (mut a, mut b) = (a.abs(), b.abs());
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.max(1)
}

/// Why a factor was refused.
fn parse_factor(text: &str) -> Result<Factor, String> {
    let text = text.trim();
    if let Some((n, d)) = text.split_once('/') {
        let whole = |s: &str| s.trim().parse::<i128>().ok().filter(|&v| v > 0);
        return match (whole(n), whole(d)) {
            (Some(num), Some(den)) => {
                let g = gcd(num, den);
                Ok(Factor {
                    num: num / g,
                    den: den / g,
                })
            }
            _ => Err(format!(
                "{text:?} is not a fraction of two positive whole numbers (like 1/7)"
            )),
        };
    }
    let nano = quantity::nano_units(text)
        .ok_or_else(|| format!("{text:?} is neither a quantity (like 1, 0.25 or 10Gi) nor a fraction (like 1/7)"))?;
    if nano <= 0 {
        return Err(format!("{text:?} must be more than zero"));
    }
    let den = 1_000_000_000;
    let g = gcd(nano, den);
    Ok(Factor {
        num: nano / g,
        den: den / g,
    })
}

impl ResourceTransformation {
    /// Its outputs with their factors; errors name the output.
    pub fn factors(&self, path: &str) -> Result<Vec<(String, Factor)>, Violation> {
        self.outputs
            .iter()
            .map(|(r, f)| {
                parse_factor(f)
                    .map(|factor| (r.clone(), factor))
                    .map_err(|why| Violation::new(format!("{path}.outputs[{r}]"), why))
            })
            .collect()
    }
}

/// Every violation of a list: names, factors, no input twice, no output
/// that is also an input (transformations do not chain), no output equal
/// to its input.
pub fn validate(list: &[ResourceTransformation]) -> Vec<Violation> {
    let mut v = Violations::default();
    for (i, t) in list.iter().enumerate() {
        let path = format!("[{i}]");
        v.qualified_name(&format!("{path}.input"), &t.input);
        if t.outputs.is_empty() && t.strategy == Strategy::Retain {
            v.push(
                format!("{path}.outputs"),
                "must name at least one output (with strategy Replace and none, the input is not charged at all)",
            );
        }
        for r in t.outputs.keys() {
            v.qualified_name(&format!("{path}.outputs[{r}]"), r);
            if *r == t.input {
                v.push(format!("{path}.outputs[{r}]"), "is the input itself");
            } else if let Some(j) = list.iter().position(|o| o.input == *r) {
                v.push(
                    format!("{path}.outputs[{r}]"),
                    format!("is the input of [{j}]; transformations do not chain"),
                );
            }
        }
        if let Err(e) = t.factors(&path) {
            v.0.push(e);
        }
        if let Some(j) = list[..i].iter().position(|o| o.input == t.input) {
            v.push(
                format!("{path}.input"),
                format!("{:?} is transformed by [{j}] already", t.input),
            );
        }
    }
    v.0
}

/// A list as YAML or JSON (a flag's value, a file), validated. The error
/// lists every violation with its place.
pub fn parse_list(text: &str) -> Result<Vec<ResourceTransformation>, String> {
    let list: Vec<ResourceTransformation> = if text.trim().is_empty() {
        Vec::new()
    } else {
        serde_saphyr::from_str(text).map_err(|e| format!("resource transformations: {e}"))?
    };
    let violations = validate(&list);
    if violations.is_empty() {
        Ok(list)
    } else {
        let lines: Vec<String> = violations.iter().map(ToString::to_string).collect();
        Err(format!("resource transformations: {}", lines.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIG: &str = "
- input: nvidia.com/mig-1g.10gb
  strategy: Replace
  outputs:
    sluice.dev/gpu-equivalent: 1/7
    example.com/gpu-memory: 10Gi
- input: nvidia.com/gpu
  outputs:
    sluice.dev/gpu-equivalent: \"1\"
";

    #[test]
    fn the_usual_list_reads() {
        let list = parse_list(MIG).expect("valid");
        assert_eq!(list.len(), 2);
        assert_eq!(list[0].strategy, Strategy::Replace);
        assert_eq!(list[1].strategy, Strategy::Retain, "Kueue's default");
        let f = list[0].factors("[0]").unwrap();
        let eq = f.iter().find(|(r, _)| r == quantity::GPU_EQUIVALENT).unwrap().1;
        assert_eq!(eq, Factor { num: 1, den: 7 });
        // A seventh of 720 720 units per 1 000 milli-slices.
        assert_eq!(
            eq.per_engine_unit("nvidia.com/mig-1g.10gb", quantity::GPU_EQUIVALENT),
            (2574, 25)
        );
        let mem = f.iter().find(|(r, _)| r == "example.com/gpu-memory").unwrap().1;
        assert_eq!(mem, Factor { num: 10 << 30, den: 1 });
        assert_eq!(parse_list("").unwrap(), vec![]);
    }

    #[test]
    fn factors_are_quantities_or_fractions() {
        assert_eq!(parse_factor("0.25"), Ok(Factor { num: 1, den: 4 }));
        assert_eq!(parse_factor("2/14"), Ok(Factor { num: 1, den: 7 }));
        assert!(parse_factor("0").unwrap_err().contains("more than zero"));
        assert!(parse_factor("1/0").unwrap_err().contains("fraction"));
        assert!(parse_factor("seven").unwrap_err().contains("neither a quantity"));
    }

    #[test]
    fn every_mistake_is_named_with_its_place() {
        let err = parse_list(
            "
- input: nvidia.com/gpu
  outputs: {nvidia.com/gpu: \"1\"}
- input: nvidia.com/mig-1g.10gb
  outputs: {nvidia.com/gpu: 1/7, credits: x}
- input: nvidia.com/gpu
  outputs: {credits: \"1\"}
",
        )
        .unwrap_err();
        assert!(
            err.contains("[0].outputs[nvidia.com/gpu]: is the input itself"),
            "{err}"
        );
        assert!(
            err.contains("[1].outputs[nvidia.com/gpu]: is the input of [0]"),
            "{err}"
        );
        assert!(err.contains("[1].outputs[credits]: \"x\" is neither"), "{err}");
        assert!(
            err.contains("[2].input: \"nvidia.com/gpu\" is transformed by [0] already"),
            "{err}"
        );
        let dropped = parse_list("- input: example.com/ignored\n  strategy: Replace\n").unwrap();
        assert!(dropped[0].outputs.is_empty(), "Replace with no outputs drops the input");
        let err = parse_list("- input: a\n  outputs: {}\n").unwrap_err();
        assert!(err.contains("[0].outputs: must name at least one output"), "{err}");
        let err = parse_list("- input: a\n  outputs: {}\n  strategy: Keep\n").unwrap_err();
        assert!(err.contains("Keep"), "{err}");
        let err = parse_list("- input: a\n  outpts: {b: \"1\"}\n").unwrap_err();
        assert!(err.contains("outpts"), "{err}");
    }
}
