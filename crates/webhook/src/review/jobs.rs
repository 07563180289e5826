//! The rules for the objects Sluice queues (every kind of `sluice_kinds`):
//! on CREATE, a queued object is suspended (and, in a namespace that
//! opted in, given the default queue) and its pod templates get the GPU
//! fixes, unless a verified owner of a queued kind holds it (a JobSet's
//! Job, a RayJob's RayCluster: `owners`); on UPDATE, only the controller
//! may unsuspend it, its queue label cannot be changed while it runs, it
//! may not grow while it runs, and such an owner cannot be added to it.

use serde_json::{Value, json};

use sluice_api::labels::HELD_REPLICAS;
use sluice_kinds::{Hold, JobKind};

use super::{Decision, GpuSubject, Reviewer, owners};
use crate::config::WebhookConfig;
use crate::gpu::{self, FixKind, SpecLocation};
use crate::patch::{PatchOp, Pointer};
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, Operation};

impl Reviewer {
    /// CREATE of an object of a queued kind: a well-formed object the kind
    /// can queue, its queue (its label, or its namespace's default), held
    /// (its suspend flag set) until Sluice admits it, and the GPU fixes on
    /// every pod template.
    pub(super) fn mutate_queued(
        &self,
        req: &AdmissionRequest<DynamicObject>,
        opted_in: bool,
        kind: JobKind,
    ) -> Decision {
        let mut d = Decision::default();
        if self.excluded(req) {
            return d;
        }
        if req.operation == Operation::Update {
            return self.mutate_held_update(req, opted_in, kind);
        }
        if req.operation != Operation::Create {
            return d;
        }
        let obj = match created_object(req) {
            Ok(obj) => obj,
            Err(denial) => {
                d.denials.push(denial);
                return d;
            }
        };
        let namespace = req
            .namespace
            .clone()
            .or_else(|| obj.metadata.namespace.clone())
            .unwrap_or_default();
        let user = req.user_info.username.as_deref().unwrap_or("");
        let Ok(queue) = self.queue_of(obj, &namespace, user, opted_in, kind, &mut d) else {
            return d;
        };
        if let Some(q) = queue {
            // What the kind cannot hold to an admission (a RayJob KubeRay
            // would not suspend, an autoscaled RayCluster): refused only
            // when it would be queued, not when its owner is.
            let refusals = kind.integration().refusals(&obj.data);
            if !refusals.is_empty() {
                d.denials = refusals;
                return d;
            }
            hold(obj, kind, &q, &mut d);
        }
        self.fix_templates(obj, kind, &namespace, &mut d);
        d
    }

    /// The LocalQueue a new object is queued in: its queue label's, or the
    /// namespace's `default` when the namespace opted in (labelled here);
    /// none for an object its verified owner of a queued kind holds
    /// ([`JobKind::made_by`]). `Err`: refused (the denial is in `d`).
    fn queue_of(
        &self,
        obj: &DynamicObject,
        namespace: &str,
        user: &str,
        opted_in: bool,
        kind: JobKind,
        d: &mut Decision,
    ) -> Result<Option<String>, ()> {
        let noun = kind.kind();
        let labels = obj.metadata.labels.as_ref();
        let label = self.cfg.queue_label_of(labels).unwrap_or(&self.cfg.queue_label);
        let default_queue = (opted_in || self.view.default_queue_enabled(namespace))
            && kind.integration().queued_by_namespace(&obj.data);
        // An object made by a queued object (a JobSet's child Job with the
        // queue label its template carried, an MPIJob's launcher, a
        // RayJob's submitter, a RayJob's RayCluster with the RayJob's
        // labels): its owner is what is queued and what Sluice suspends;
        // holding the object would keep it from ever running. The owner
        // must exist: an object that would be queued and names an owner
        // the cache cannot confirm is refused (its operator retries; a
        // forged owner stays refused).
        let would_queue = labels.is_some_and(|l| l.contains_key(label)) || default_queue;
        let part_of_queued = !kind.made_by().is_empty()
            && match owners::made_by_queued_kind(self.view.as_ref(), &self.cfg, user, kind, namespace, &obj.metadata) {
                Ok(made) => made,
                Err(why) if would_queue => {
                    d.denials.push(why);
                    return Err(());
                }
                // Not queued either way: the claim exempts nothing.
                Err(_) => false,
            };
        match labels.and_then(|l| l.get(label)) {
            Some(_) if part_of_queued => Ok(None),
            Some(q) if q.is_empty() => {
                d.denials.push(format!(
                    "metadata.labels[{label}]: is empty; it must name a LocalQueue in namespace {namespace:?}"
                ));
                Err(())
            }
            Some(q) => {
                if self.view.synced() && !self.view.local_queue_exists(namespace, q) {
                    d.warnings.push(format!(
                        "sluice: LocalQueue {q:?} does not exist in namespace {namespace:?}; the {noun} stays suspended until it does"
                    ));
                }
                Ok(Some(q.clone()))
            }
            None if !part_of_queued && default_queue => Ok(self.default_queue(obj, namespace, label, noun, d)),
            None => Ok(None),
        }
    }

    /// An unlabelled object in a namespace that opted in: labelled with the
    /// namespace's LocalQueue `default`, unless the cache knows there is none
    /// (until it has listed, the object is queued anyway, fail closed: it
    /// waits suspended until that LocalQueue exists).
    fn default_queue(
        &self,
        obj: &DynamicObject,
        namespace: &str,
        label: &str,
        noun: &str,
        d: &mut Decision,
    ) -> Option<String> {
        let default = sluice_api::labels::DEFAULT_LOCAL_QUEUE_NAME;
        let synced = self.view.synced();
        if synced && !self.view.local_queue_exists(namespace, default) {
            d.warnings.push(format!(
                "sluice: namespace {namespace:?} opts in to default queueing but has no LocalQueue {default:?}; the {noun} is not queued"
            ));
            return None;
        }
        let labels_ptr = Pointer::from_plain("/metadata/labels");
        d.ops.push(if obj.metadata.labels.is_none() {
            PatchOp::add(
                &labels_ptr,
                Value::Object(serde_json::Map::from_iter([(label.to_owned(), json!(default))])),
            )
        } else {
            PatchOp::add(&labels_ptr.key(label), json!(default))
        });
        d.warnings.push(format!(
            "sluice: labelled {label}={default}: namespace {namespace:?} queues unlabelled Jobs in its LocalQueue {default:?}"
        ));
        if !synced {
            d.warnings.push(format!(
                "sluice: the webhook has not yet listed LocalQueues, so it could not check that LocalQueue {default:?} exists in namespace {namespace:?}; the {noun} stays suspended until it does"
            ));
        }
        d.fixes.push(FixKind::QueueLabel);
        Some(default.to_owned())
    }

    /// The GPU fixes on each pod template of `obj` (unless its namespace
    /// and labels skip them).
    fn fix_templates(&self, obj: &DynamicObject, kind: JobKind, namespace: &str, d: &mut Decision) {
        for (at, labels_at) in templates(kind, obj) {
            let template_labels: Option<std::collections::BTreeMap<String, String>> = obj
                .data
                .pointer(&labels_at)
                .and_then(|l| serde_json::from_value(l.clone()).ok());
            if let Some(spec) = obj.data.pointer(at.pointer.as_str())
                && !self.gpu_fixes_skipped(namespace, template_labels.as_ref())
            {
                let what = format!(
                    "the pod template ({})",
                    labels_at.trim_start_matches('/').replace('/', ".")
                );
                match gpu::fix_pod_spec(&self.cfg.gpu, self.runtime_class(), spec, &at) {
                    Ok(out) => d.absorb_gpu(out, &self.cfg, GpuSubject::Template(&what)),
                    Err(e) => d.denials.push(e.to_string()),
                }
            }
        }
    }

    /// `opted_in`: the request came through a default-queue entry (an
    /// object without a queue label in a namespace that queues every
    /// object), so it is queued in `default` if its kind queues it there.
    pub(super) fn validate_queued(
        &self,
        req: &AdmissionRequest<DynamicObject>,
        opted_in: bool,
        kind: JobKind,
    ) -> Decision {
        let mut d = Decision::default();
        if req.operation != Operation::Update {
            return d;
        }
        let (Some(new), Some(old)) = (&req.object, &req.old_object) else {
            d.denials
                .push("object, oldObject: both must be present in an UPDATE request".to_owned());
            return d;
        };
        let namespace = req
            .namespace
            .clone()
            .or_else(|| old.metadata.namespace.clone())
            .unwrap_or_default();
        let user = req.user_info.username.as_deref().unwrap_or("");
        if !kind.made_by().is_empty()
            && let Some(done) = self.owner_rules(kind, old, new, &namespace, user)
        {
            return done;
        }
        let mut update = QueuedUpdate::new(&self.cfg, kind, old, new);
        if opted_in && update.before.is_none() && update.after.is_none() {
            // Queued by its namespace (the controller holds it in
            // `default` without writing a label).
            if !kind.integration().queued_by_namespace(&old.data) {
                return d;
            }
            update.by_namespace();
        }
        d.denials.extend(self.label_rules(&update, &namespace, user));
        d.denials.extend(self.queued_rules(&update, user));
        d
    }

    /// The queue label's rules: it does not change while the object runs,
    /// and it is not taken off in a namespace that queues every object,
    /// nor (except by an admission writer) off a suspended object, which
    /// would then be free to start unadmitted.
    fn label_rules(&self, u: &QueuedUpdate<'_>, namespace: &str, user: &str) -> Vec<String> {
        let (noun, label) = (u.kind.kind(), u.label);
        let show = |v: &Option<String>| v.as_deref().map_or("(none)".to_owned(), |s| format!("{s:?}"));
        let mut denials = Vec::new();
        if u.before != u.after && (u.running(u.old) || u.running(u.new)) {
            denials.push(format!(
                "metadata.labels[{label}]: cannot change from {} to {} while the {noun} runs ({} is not true); suspend the {noun} first",
                show(&u.before),
                show(&u.after),
                u.suspend_field
            ));
        }
        let Some(q) = u.before.as_ref().filter(|_| u.after.is_none()) else {
            return denials;
        };
        // In a namespace that queues every object, no object leaves its
        // queue: the controller would queue it in `default` anyway.
        if self.view.default_queue_enabled(namespace) {
            denials.push(format!(
                "metadata.labels[{label}]: cannot be removed: namespace {namespace:?} queues every {noun} ({}={}), so the {noun} stays queued (now in LocalQueue {q:?}); set the label to another LocalQueue, or delete the {noun}",
                sluice_api::labels::DEFAULT_QUEUE,
                sluice_api::labels::DEFAULT_QUEUE_ENABLED,
            ));
        } else if u.suspended(u.old) && !self.cfg.is_admission_writer(user) {
            // Taking the label off a suspended object would make it
            // unmanaged, free to be unsuspended by its owner: the same
            // bypass in two steps.
            denials.push(format!(
                "metadata.labels[{label}]: cannot be removed by {user:?}: the {noun} waits in LocalQueue {q:?}, and without the label it could start without being admitted; delete the {noun} instead, or move it to another LocalQueue"
            ));
        }
        denials
    }

    /// The rules of a queued object (a queue label before or after): a
    /// running one does not grow past its admission, no update lets in
    /// what the kind refuses on CREATE, and only the Sluice controller (an
    /// admission writer) unsuspends it, once it is admitted.
    fn queued_rules(&self, u: &QueuedUpdate<'_>, user: &str) -> Vec<String> {
        let (kind, noun) = (u.kind, u.kind.kind());
        let Some(q) = u.before.as_ref().or(u.after.as_ref()) else {
            return Vec::new();
        };
        let writer = self.cfg.is_admission_writer(user);
        let mut denials = Vec::new();
        if u.running(u.old) && u.running(u.new) && !writer {
            denials.extend(refused_growth(kind, u.old, u.new, q));
        }
        // What the kind refuses on CREATE (an autoscaled RayCluster) is
        // not let in by an update of a queued object either.
        let had = kind.integration().refusals(&u.old.data);
        denials.extend(
            kind.integration()
                .refusals(&u.new.data)
                .into_iter()
                .filter(|r| !had.contains(r))
                .map(|r| format!("{r} (the {noun} is queued in LocalQueue {q:?})")),
        );
        if u.suspended(u.old) && !u.suspended(u.new) && !writer {
            let (label, suspend_field) = (u.label, u.suspend_field);
            denials.push(match u.hold {
                Hold::Suspend(_) => format!(
                    "{suspend_field}: cannot be changed from true to false by {user:?}: the {noun} waits in LocalQueue {q:?} ({label}) and only the Sluice controller unsuspends it, once the {noun} is admitted; leave {suspend_field} true"
                ),
                Hold::Replicas => format!(
                    "{suspend_field}: cannot be raised from 0 by {user:?}: the {noun} waits in LocalQueue {q:?} ({label}), held at 0 replicas until Sluice admits it and runs the replicas in metadata.annotations[{HELD_REPLICAS}]; change that annotation to ask for another count"
                ),
            });
        }
        denials
    }

    /// An object's owner of a queued kind that makes it
    /// ([`JobKind::made_by`]): one given after creation is refused (except
    /// to admission writers); a verified, unchanged one leaves the object
    /// to its owner's operator. `Some`: the review ends here.
    fn owner_rules(
        &self,
        kind: JobKind,
        old: &DynamicObject,
        new: &DynamicObject,
        namespace: &str,
        user: &str,
    ) -> Option<Decision> {
        let mut d = Decision::default();
        let noun = kind.kind();
        let controller =
            |o: &DynamicObject| owners::queued_controller(kind, &o.metadata).map(|(_, r, _)| r.uid.clone());
        let (was, is) = (controller(old), controller(new));
        if is.is_some() && is != was && !self.cfg.is_admission_writer(user) {
            // Adopted after creation: that would leave a queued object to
            // an object its author chose, free to start unadmitted.
            if let Some((i, r, k)) = owners::queued_controller(kind, &new.metadata)
                && self.cfg.queue_label_of(new.metadata.labels.as_ref()).is_some()
            {
                d.denials.push(format!(
                    "metadata.ownerReferences[{i}]: cannot be changed by {user:?} to name {} {:?} as the controller of a queued {noun}; the controller of a {noun} made by a {} is set when the {noun} is created",
                    k.kind(),
                    r.name,
                    k.kind()
                ));
                return Some(d);
            }
        }
        // Its owner's operator suspends and resumes it with its owner.
        if was.is_some()
            && is == was
            && owners::made_by_queued_kind(self.view.as_ref(), &self.cfg, user, kind, namespace, &old.metadata)
                == Ok(true)
        {
            return Some(d);
        }
        None
    }
}

/// An UPDATE of an object of a queued kind: its queue label (the key in
/// use) and the queue it names before and after, and where its suspend
/// flag is.
struct QueuedUpdate<'a> {
    kind: JobKind,
    old: &'a DynamicObject,
    new: &'a DynamicObject,
    label: &'a str,
    before: Option<String>,
    after: Option<String>,
    hold: sluice_kinds::Hold,
    suspend_field: &'static str,
}

impl<'a> QueuedUpdate<'a> {
    fn new(cfg: &'a WebhookConfig, kind: JobKind, old: &'a DynamicObject, new: &'a DynamicObject) -> Self {
        let key_of = |o: &DynamicObject| cfg.queue_label_of(o.metadata.labels.as_ref());
        let label = key_of(new).or_else(|| key_of(old)).unwrap_or(&cfg.queue_label);
        let queue = |o: &DynamicObject| {
            let labels = o.metadata.labels.as_ref();
            let key = cfg.queue_label_of(labels)?;
            labels.and_then(|l| l.get(key)).cloned()
        };
        let hold = kind.integration().hold();
        Self {
            kind,
            old,
            new,
            label,
            before: queue(old),
            after: queue(new),
            hold,
            suspend_field: hold.field(),
        }
    }

    /// Queued in its namespace's `default` LocalQueue without a label.
    fn by_namespace(&mut self) {
        let default = sluice_api::labels::DEFAULT_LOCAL_QUEUE_NAME.to_owned();
        self.before = Some(default.clone());
        self.after = Some(default);
    }

    fn suspended(&self, o: &DynamicObject) -> bool {
        held(self.hold, o)
    }

    fn running(&self, o: &DynamicObject) -> bool {
        !self.suspended(o) && self.kind.integration().finished(&o.data).is_none()
    }
}

/// A running object's admission covers what it runs now: each way `new`
/// asks for more than `old` (queued in LocalQueue `q`), as a denial.
fn refused_growth(kind: JobKind, old: &DynamicObject, new: &DynamicObject, q: &str) -> Vec<String> {
    let noun = kind.kind();
    let requeue = requeue_hint(kind);
    super::shape::grown(kind, old, new)
        .into_iter()
        .map(|grown| {
            format!(
                "{grown}: cannot grow while the {noun} runs: Sluice admitted it in LocalQueue {q:?} for what it runs now; scaling down is allowed. To run more, {requeue}, or delete and recreate the {noun}"
            )
        })
        .collect()
}

/// How the owner of a running object of `kind` queues it again with a new
/// shape.
pub(super) fn requeue_hint(kind: JobKind) -> String {
    match kind.integration().hold() {
        Hold::Suspend(f) => format!(
            "set {} to true in the same update (it is queued again with its new shape)",
            f.field
        ),
        Hold::Replicas => format!(
            "set spec.replicas to 0 and the metadata.annotations[{HELD_REPLICAS}] annotation to the replicas wanted in one update (its pods stop, and it is queued again for that many)"
        ),
    }
}

/// Each pod template of `obj`: where its spec is, and the pointer of its
/// labels.
pub(super) fn templates(kind: JobKind, obj: &DynamicObject) -> Vec<(SpecLocation, String)> {
    kind.integration()
        .templates(&obj.data)
        .into_iter()
        .map(|t| {
            (
                SpecLocation {
                    pointer: Pointer::from_plain(&t.spec),
                    field: t.field,
                },
                t.labels,
            )
        })
        .collect()
}

/// The object of a CREATE, if it is one this webhook can patch; else why
/// it is refused, with its field.
fn created_object(req: &AdmissionRequest<DynamicObject>) -> Result<&DynamicObject, String> {
    let Some(obj) = &req.object else {
        return Err("object: missing from the CREATE request".to_owned());
    };
    // The API server always sends these; the patches assume them.
    if obj.metadata.name.is_none() && obj.metadata.generate_name.is_none() {
        return Err("metadata.name: required (or metadata.generateName)".to_owned());
    }
    if !obj.data.get("spec").is_some_and(Value::is_object) {
        return Err("spec: missing or not an object".to_owned());
    }
    Ok(obj)
}

/// Holds an object queued in `q` until Sluice admits it (its suspend flag
/// set, or a serving object's replicas kept and set to zero), with what
/// its kind sets where its author left it unset.
fn hold(obj: &DynamicObject, kind: JobKind, q: &str, d: &mut Decision) {
    match kind.integration().hold() {
        Hold::Suspend(f) => hold_suspended(obj, kind, f, q, d),
        Hold::Replicas => hold_at_zero(obj, kind, q, d),
    }
    for def in kind.integration().create_defaults(&obj.data) {
        d.ops.push(PatchOp::add(&Pointer::from_plain(&def.pointer), def.value));
        d.warnings.push(format!("sluice: {}", def.why));
    }
}

/// Its suspend flag set to true (its parent created where missing, as a
/// Kubeflow job's `runPolicy` may be).
fn hold_suspended(obj: &DynamicObject, kind: JobKind, f: sluice_kinds::SuspendField, q: &str, d: &mut Decision) {
    let (at, field) = (f.pointer, f.field);
    if held(Hold::Suspend(f), obj) {
        return;
    }
    let parent = &at[..at.rfind('/').unwrap_or(0)];
    d.ops.push(
        if parent == "/spec" || obj.data.pointer(parent).is_some_and(Value::is_object) {
            PatchOp::add(&Pointer::from_plain(at), json!(true))
        } else {
            PatchOp::add(&Pointer::from_plain(parent), json!({"suspend": true}))
        },
    );
    let noun = kind.kind();
    d.warnings.push(format!(
        "sluice: set {field} to true: the {noun} waits in LocalQueue {q:?} until Sluice admits it"
    ));
    d.fixes.push(FixKind::Suspend);
}

/// A serving object held at `spec.replicas: 0`, the replicas it asks for
/// (`asked`, else its own) kept in its annotation.
fn hold_at_zero(obj: &DynamicObject, kind: JobKind, q: &str, d: &mut Decision) {
    if held(Hold::Replicas, obj) {
        return;
    }
    let asked = obj.data.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
    set_held(obj, asked, d);
    d.warnings.push(format!(
        "sluice: set spec.replicas to 0 and kept its {asked} in metadata.annotations[{HELD_REPLICAS}]: the {} waits in LocalQueue {q:?} until Sluice admits it, then runs {asked}",
        kind.kind()
    ));
    d.fixes.push(FixKind::Suspend);
}

/// Whether `o` is held as `hold` says (a DynamicObject keeps its metadata
/// apart from the rest of the object).
fn held(hold: Hold, o: &DynamicObject) -> bool {
    match hold {
        Hold::Suspend(f) => o.data.pointer(f.pointer) == Some(&Value::Bool(true)),
        Hold::Replicas => {
            o.data.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1) == 0
                && o.metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key(HELD_REPLICAS))
        }
    }
}

/// The operations that hold `obj` at zero replicas asking for `asked`.
fn set_held(obj: &DynamicObject, asked: i64, d: &mut Decision) {
    let annotations = Pointer::from_plain("/metadata/annotations");
    d.ops.push(if obj.metadata.annotations.is_none() {
        PatchOp::add(&annotations, json!({HELD_REPLICAS: asked.to_string()}))
    } else {
        PatchOp::add(&annotations.key(HELD_REPLICAS), json!(asked.to_string()))
    });
    d.ops
        .push(PatchOp::add(&Pointer::from_plain("/spec/replicas"), json!(0)));
}

impl Reviewer {
    /// An UPDATE of a held serving object that asks it to run (replicas
    /// above zero, or its annotation dropped) by anyone but an admission
    /// writer: it stays held, asking for those replicas (`kubectl apply`
    /// of its manifest, or a new count, changes what it waits for, never
    /// starts it).
    fn mutate_held_update(&self, req: &AdmissionRequest<DynamicObject>, opted_in: bool, kind: JobKind) -> Decision {
        let mut d = Decision::default();
        let (Some(new), Some(old)) = (&req.object, &req.old_object) else {
            return d;
        };
        let user = req.user_info.username.as_deref().unwrap_or("");
        if kind.integration().hold() != Hold::Replicas
            || self.cfg.is_admission_writer(user)
            || !held(Hold::Replicas, old)
            || held(Hold::Replicas, new)
        {
            return d;
        }
        let queue = self
            .cfg
            .queue_label_of(new.metadata.labels.as_ref())
            .and_then(|k| new.metadata.labels.as_ref()?.get(k).cloned());
        let Some(q) = queue.or_else(|| opted_in.then(|| sluice_api::labels::DEFAULT_LOCAL_QUEUE_NAME.to_owned()))
        else {
            return d;
        };
        let replicas = new.data.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
        let kept = |o: &DynamicObject| {
            o.metadata
                .annotations
                .as_ref()?
                .get(HELD_REPLICAS)?
                .trim()
                .parse::<i64>()
                .ok()
        };
        let asked = if replicas > 0 { replicas } else { kept(old).unwrap_or(0) };
        set_held(new, asked, &mut d);
        d.warnings.push(format!(
            "sluice: the {} waits in LocalQueue {q:?}: it stays at spec.replicas 0 and now asks for {asked} (metadata.annotations[{HELD_REPLICAS}]), which it runs once Sluice admits it",
            kind.kind()
        ));
        d.fixes.push(FixKind::Suspend);
        d
    }
}
