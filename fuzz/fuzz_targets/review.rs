//! Review decoding and patch generation: any body, any endpoint, never a
//! panic; every patch applies to the object it was made for, and a patched
//! Pod reviewed again needs no further patch ([`sluice_webhook_fuzz::review`]).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| sluice_webhook_fuzz::review(data));
