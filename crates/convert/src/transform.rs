//! Resource transformations ([`sluice_api::transform`]) as the engine
//! takes them: factors in engine units, checked by the engine itself, so
//! the controller's flag and the simulator's scenario fail the same way.

use sluice_api::transform::{ResourceTransformation, Strategy, parse_list};
use sluice_scheduler as eng;

use crate::adapter::{AdapterError, narrow};

/// Resource transformations as the engine takes them: factors in engine
/// units ([`sluice_api::quantity::units_per_whole`]). Errors name the
/// transformation's place and field.
pub fn for_engine(list: &[ResourceTransformation]) -> Result<Vec<eng::Transformation>, AdapterError> {
    list.iter()
        .enumerate()
        .map(|(i, t)| {
            let path = format!("resourceTransformations[{i}]");
            let factors = t.factors(&path).map_err(|v| AdapterError::Invalid {
                field: v.path,
                message: v.message,
            })?;
            let outputs = factors
                .into_iter()
                .map(|(r, f)| {
                    let (num, den) = f.per_engine_unit(&t.input, &r);
                    let field = format!("{path}.outputs[{r}]");
                    Ok((
                        r,
                        eng::Ratio {
                            num: narrow(&field, num)?,
                            den: narrow(&field, den)?,
                        },
                    ))
                })
                .collect::<Result<_, AdapterError>>()?;
            Ok(eng::Transformation {
                input: t.input.clone(),
                strategy: match t.strategy {
                    Strategy::Retain => eng::TransformStrategy::Retain,
                    Strategy::Replace => eng::TransformStrategy::Replace,
                },
                outputs,
            })
        })
        .collect()
}

/// A list as YAML or JSON text, converted and accepted by an engine; the
/// error names every mistake with its place.
pub fn from_text(text: &str) -> Result<Vec<eng::Transformation>, String> {
    let list = parse_list(text)?;
    let out = for_engine(&list).map_err(|e| format!("resource transformations: {e}"))?;
    eng::Engine::new()
        .set_transformations(&out)
        .map_err(|e| e.to_string())?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_is_a_seventh_in_engine_units() {
        let list = from_text(
            "- input: nvidia.com/mig-1g.10gb\n  strategy: Replace\n  outputs: {sluice.dev/gpu-equivalent: 1/7}\n",
        )
        .unwrap();
        assert_eq!(list[0].strategy, eng::TransformStrategy::Replace);
        assert_eq!(
            list[0].outputs,
            vec![(
                "sluice.dev/gpu-equivalent".to_string(),
                eng::Ratio { num: 2574, den: 25 }
            )]
        );
        let err = from_text("- input: x\n  outputs: {y: \"0\"}\n").unwrap_err();
        assert!(
            err.contains("[0].outputs[y]") && err.contains("more than zero"),
            "{err}"
        );
    }
}
