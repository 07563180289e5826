//! The resource columns of the report's tables, and the order resources
//! are listed in.

use sluice_api::resources::is_gpu;

use super::{Group, ResourceUse};

/// GPU resources first, then the rest by name (`cpu`, `memory`, …).
pub fn resource_order(a: &str, b: &str) -> std::cmp::Ordering {
    fn rank(r: &str) -> u8 {
        // GPU-equivalents first: where they are the quota, fairness and
        // the columns are read in them.
        if r == sluice_api::quantity::GPU_EQUIVALENT || r == "nvidia.com/gpu" {
            0
        } else if r.contains("gpu") || r.contains("mig-") {
            1
        } else if r == "cpu" {
            2
        } else if r == "memory" {
            3
        } else {
            4
        }
    }
    let equivalent_first =
        (b == sluice_api::quantity::GPU_EQUIVALENT).cmp(&(a == sluice_api::quantity::GPU_EQUIVALENT));
    rank(a).cmp(&rank(b)).then(equivalent_first).then_with(|| a.cmp(b))
}

/// A resource column of the queue tables: GPUs per flavor (an H100 is not
/// an L4), other resources summed over flavors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    pub resource: String,
    pub flavor: Option<String>,
}

impl Column {
    /// The columns for a report, from its totals.
    pub fn all(totals: &Group) -> Vec<Column> {
        let gpus = totals.flavors.iter().filter(|x| is_gpu(&x.resource));
        let rest = totals.resources.iter().filter(|x| !is_gpu(&x.resource));
        gpus.chain(rest)
            .map(|x| Column {
                resource: x.resource.clone(),
                flavor: x.flavor.clone(),
            })
            .collect()
    }

    /// This column's figures in a group.
    pub fn of<'a>(&self, g: &'a Group) -> Option<&'a ResourceUse> {
        let list = if self.flavor.is_some() {
            &g.flavors
        } else {
            &g.resources
        };
        list.iter()
            .find(|x| x.resource == self.resource && x.flavor == self.flavor)
    }

    /// `gpu a100-80gb`, `cpu`, `memory`.
    pub fn label(&self) -> String {
        let short = match self.resource.as_str() {
            "nvidia.com/gpu" => "gpu",
            r => r.strip_prefix("nvidia.com/").unwrap_or(r),
        };
        match &self.flavor {
            Some(f) => format!("{short} {f}"),
            None => short.to_string(),
        }
    }
}
