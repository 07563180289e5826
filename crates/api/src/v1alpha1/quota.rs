//! Quota as ClusterQueues and Cohorts both write it: resource groups of
//! flavors, each with a nominal quota and optional borrowing and lending
//! limits per resource, and the rules they follow (one set of rules for
//! both kinds).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::quantity::non_negative_milli;
use crate::validation::{DNS1123_SUBDOMAIN_PATTERN, RESOURCE_NAME_PATTERN, Violations};

/// At most this many resource groups per ClusterQueue or Cohort.
pub const MAX_RESOURCE_GROUPS: usize = 16;
/// At most this many flavors per resource group.
pub const MAX_FLAVORS_PER_GROUP: usize = 64;
/// At most this many resources per resource group (and so per flavor).
pub const MAX_RESOURCES_PER_GROUP: usize = 16;

/// Resources that get their flavor assigned together, and the quota each
/// flavor provides for them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.flavors.all(f, size(f.resources) == size(self.coveredResources))",
        "message": "each flavor must list exactly the resources in coveredResources"
    }
]))]
pub struct ResourceGroup {
    /// Resources covered by this group, e.g. `[cpu, memory, nvidia.com/gpu]`.
    /// Every flavor of the group lists quota for exactly these resources. A
    /// resource a workload requests but no group covers cannot be admitted.
    #[schemars(length(min = 1, max = 16), inner(length(max = 317), regex(pattern = RESOURCE_NAME_PATTERN)))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub covered_resources: Vec<String>,
    /// Flavors in order of preference, each with its quota for the covered
    /// resources. A workload gets the first flavor where all its requests of
    /// this group's resources fit.
    #[schemars(length(min = 1, max = 64))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub flavors: Vec<FlavorQuotas>,
}

/// Quota of one flavor for the resources of a group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlavorQuotas {
    /// Name of a ResourceFlavor. Each flavor appears at most once in a
    /// ClusterQueue (or Cohort).
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS1123_SUBDOMAIN_PATTERN))]
    pub name: String,
    /// Quota for each covered resource of the group, in any order.
    #[schemars(length(min = 1, max = 16))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub resources: Vec<ResourceQuota>,
}

/// Quota of one resource of one flavor.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceQuota {
    /// Resource name, e.g. `cpu`, `memory`, `nvidia.com/gpu`,
    /// `nvidia.com/mig-1g.10gb`; one of the group's coveredResources.
    #[schemars(length(min = 1, max = 317), regex(pattern = RESOURCE_NAME_PATTERN))]
    pub name: String,
    /// Amount of the resource this queue owns, e.g. `16` GPUs or `512Gi`
    /// memory. Workloads of the queue may always use it (preempting
    /// borrowers if the preemption policy allows). In a Cohort: quota of the
    /// cohort itself, which the queues below it may borrow. Not negative.
    #[schemars(schema_with = "super::common::non_negative_quantity")]
    pub nominal_quota: Quantity,
    /// Most this queue may borrow from its cohort on top of nominalQuota.
    /// Unset: no limit beyond what the cohort can lend. Requires a cohort.
    /// In a Cohort: most its subtree may take from its parent; requires a
    /// parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::common::optional_non_negative_quantity")]
    pub borrowing_limit: Option<Quantity>,
    /// Most of nominalQuota other queues of the cohort may borrow while this
    /// queue does not use it; the rest is kept for this queue. Unset: all of
    /// it may be lent. At most nominalQuota. Requires a cohort. In a Cohort:
    /// most of its own quota it lends to the rest of the tree; requires a
    /// parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::common::optional_non_negative_quantity")]
    pub lending_limit: Option<Quantity>,
}

/// Whose resource groups are checked, for the messages and the limits rule.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Owner {
    /// `ClusterQueue` or `Cohort`.
    pub(crate) kind: &'static str,
    /// The field that puts it in a cohort tree: `spec.cohort`, `spec.parent`.
    pub(crate) link: &'static str,
    /// What that field names: `cohort`, `parent`.
    pub(crate) linked_to: &'static str,
    /// Whether that field is set (limits need it).
    pub(crate) linked: bool,
}

/// Checks `spec.resourceGroups`: at most [`MAX_RESOURCE_GROUPS`] groups,
/// each covering at least one resource; a resource in one group only; a
/// flavor once per owner; every flavor listing exactly its group's covered
/// resources; quantities that parse and are not negative; `lendingLimit`
/// at most `nominalQuota`; limits only when the owner is linked.
pub(crate) fn validate_resource_groups(v: &mut Violations, groups: &[ResourceGroup], owner: Owner) {
    if groups.len() > MAX_RESOURCE_GROUPS {
        v.push(
            "spec.resourceGroups",
            format!("must have at most {MAX_RESOURCE_GROUPS} items"),
        );
    }
    // Resource → first group that covers it; flavor → first place it appears.
    let mut covered_by: BTreeMap<&str, usize> = BTreeMap::new();
    let mut flavor_at: BTreeMap<&str, String> = BTreeMap::new();
    for (gi, group) in groups.iter().enumerate() {
        let gpath = format!("spec.resourceGroups[{gi}]");
        validate_group(v, &gpath, gi, group, owner, &mut covered_by, &mut flavor_at);
    }
}

/// One resource group: its covered resources, then each flavor's name and
/// quotas (exactly the covered resources, each once).
fn validate_group<'a>(
    v: &mut Violations,
    gpath: &str,
    gi: usize,
    group: &'a ResourceGroup,
    owner: Owner,
    covered_by: &mut BTreeMap<&'a str, usize>,
    flavor_at: &mut BTreeMap<&'a str, String>,
) {
    let covered_here = covered_resources(v, gpath, gi, group, covered_by);
    if group.flavors.is_empty() {
        v.push(format!("{gpath}.flavors"), "must list at least one flavor");
    } else if group.flavors.len() > MAX_FLAVORS_PER_GROUP {
        v.push(
            format!("{gpath}.flavors"),
            format!("must have at most {MAX_FLAVORS_PER_GROUP} items"),
        );
    }
    for (fi, flavor) in group.flavors.iter().enumerate() {
        let fpath = format!("{gpath}.flavors[{fi}]");
        let npath = format!("{fpath}.name");
        v.dns1123_subdomain(&npath, &flavor.name);
        if let Some(first) = flavor_at.get(flavor.name.as_str()) {
            v.push(
                &npath,
                format!(
                    "duplicate flavor {:?}, already used at {first}; a flavor may appear once per {}",
                    flavor.name, owner.kind
                ),
            );
        } else {
            flavor_at.insert(flavor.name.as_str(), npath);
        }
        flavor_quotas(v, gpath, &fpath, flavor, owner, &covered_here);
    }
}

/// A group's `coveredResources`: one to so many, each a qualified name,
/// once in the group and in no other group. The resources it covers.
fn covered_resources<'a>(
    v: &mut Violations,
    gpath: &str,
    gi: usize,
    group: &'a ResourceGroup,
    covered_by: &mut BTreeMap<&'a str, usize>,
) -> BTreeSet<&'a str> {
    if group.covered_resources.is_empty() {
        v.push(format!("{gpath}.coveredResources"), "must list at least one resource");
    } else if group.covered_resources.len() > MAX_RESOURCES_PER_GROUP {
        v.push(
            format!("{gpath}.coveredResources"),
            format!("must have at most {MAX_RESOURCES_PER_GROUP} items"),
        );
    }
    let mut covered_here: BTreeSet<&str> = BTreeSet::new();
    for (ri, resource) in group.covered_resources.iter().enumerate() {
        let rpath = format!("{gpath}.coveredResources[{ri}]");
        v.qualified_name(&rpath, resource);
        if !covered_here.insert(resource.as_str()) {
            v.push(rpath, format!("duplicate resource {resource:?}"));
            continue;
        }
        match covered_by.get(resource.as_str()) {
            Some(&other) if other != gi => v.push(
                rpath,
                format!("resource {resource:?} is already covered by spec.resourceGroups[{other}]; a resource may be in at most one group"),
            ),
            Some(_) => {}
            None => {
                covered_by.insert(resource.as_str(), gi);
            }
        }
    }
    covered_here
}

/// A flavor's quotas: each valid, each resource once, exactly the group's
/// covered resources.
fn flavor_quotas(
    v: &mut Violations,
    gpath: &str,
    fpath: &str,
    flavor: &FlavorQuotas,
    owner: Owner,
    covered_here: &BTreeSet<&str>,
) {
    let mut listed: BTreeSet<&str> = BTreeSet::new();
    for (ri, quota) in flavor.resources.iter().enumerate() {
        let rpath = format!("{fpath}.resources[{ri}]");
        validate_quota(v, &rpath, quota, owner);
        if !listed.insert(quota.name.as_str()) {
            v.push(format!("{rpath}.name"), format!("duplicate resource {:?}", quota.name));
        } else if !covered_here.contains(quota.name.as_str()) {
            v.push(
                format!("{rpath}.name"),
                format!("resource {:?} is not in {gpath}.coveredResources", quota.name),
            );
        }
    }
    for missing in covered_here.difference(&listed) {
        v.push(
            format!("{fpath}.resources"),
            format!("missing quota for covered resource {missing:?}; every flavor lists exactly the group's coveredResources"),
        );
    }
}

fn validate_quota(v: &mut Violations, rpath: &str, quota: &ResourceQuota, owner: Owner) {
    v.qualified_name(&format!("{rpath}.name"), &quota.name);
    let nominal_path = format!("{rpath}.nominalQuota");
    let nominal = match non_negative_milli(&nominal_path, &quota.nominal_quota) {
        Ok(n) => Some(n),
        Err(e) => {
            v.push(nominal_path, format!("quantity {:?} {}", e.value, e.kind));
            None
        }
    };
    let Owner { link, linked_to, .. } = owner;
    if let Some(limit) = &quota.borrowing_limit {
        let path = format!("{rpath}.borrowingLimit");
        if let Err(e) = non_negative_milli(&path, limit) {
            v.push(&path, format!("quantity {:?} {}", e.value, e.kind));
        }
        if !owner.linked {
            v.push(
                path,
                format!("requires {link}: without a {linked_to} there is nothing to borrow"),
            );
        }
    }
    if let Some(limit) = &quota.lending_limit {
        let path = format!("{rpath}.lendingLimit");
        match non_negative_milli(&path, limit) {
            Ok(lending) => {
                if let Some(nominal) = nominal
                    && lending > nominal
                {
                    v.push(
                        &path,
                        format!(
                            "must be at most nominalQuota ({}), got {}",
                            quota.nominal_quota.0, limit.0
                        ),
                    );
                }
            }
            Err(e) => v.push(&path, format!("quantity {:?} {}", e.value, e.kind)),
        }
        if !owner.linked {
            v.push(
                path,
                format!("requires {link}: without a {linked_to} there is nobody to lend to"),
            );
        }
    }
}
