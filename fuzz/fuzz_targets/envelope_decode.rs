//! The envelope decoder on arbitrary bytes: refuse, or decode to an envelope that encodes back to
//! exactly these bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mnemo_log::Envelope;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(envelope) = Envelope::decode(bytes) {
        assert_eq!(envelope.encode(), bytes, "a decoded envelope must encode back to its bytes");
    }
});
