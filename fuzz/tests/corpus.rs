//! Replays every kept input through the fuzz check on the stable
//! toolchain, without libFuzzer: the seeds (`seeds/review`), the corpus a
//! run left (`corpus/review`, minimized) and every input that once failed
//! (`regressions/review`, one file each, named after what it found).

use std::path::Path;

fn replay(folder: &str) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
    let Ok(entries) = std::fs::read_dir(&dir) else { return 0 };
    let mut n = 0;
    for entry in entries {
        let path = entry.expect("a readable folder").path();
        let data = std::fs::read(&path).expect("a readable input");
        let caught = std::panic::catch_unwind(|| sluice_webhook_fuzz::review(&data));
        assert!(caught.is_ok(), "{} fails the fuzz check", path.display());
        n += 1;
    }
    n
}

#[test]
fn the_seeds_pass() {
    assert!(replay("seeds/review") > 0, "no seeds");
}

#[test]
fn the_corpus_passes() {
    assert!(replay("corpus/review") > 0, "no corpus");
}

#[test]
fn every_input_that_once_failed_passes() {
    replay("regressions/review");
}
