//! Opens a store and runs `remember` for session `s1` with a canonicalizer that prints
//! `canonicalizing`, flushed, and then never answers: a process stuck after the proposal and
//! before the commit, for the memory crash test to kill.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use mnemo::memory::{BoxFuture, CanonicalizePrompt, Canonicalizer, MemoryModels, ModelError};
use mnemo::records::SessionId;
use mnemo::{Config, Mnemo};

#[derive(Debug)]
struct Stuck;

impl Canonicalizer for Stuck {
    fn name(&self) -> &str {
        "stuck"
    }

    fn canonicalize<'a>(&'a self, _: &'a CanonicalizePrompt) -> BoxFuture<'a, Result<String, ModelError>> {
        Box::pin(async {
            let mut out = std::io::stdout();
            let _ = writeln!(out, "canonicalizing");
            let _ = out.flush();
            std::future::pending().await
        })
    }
}

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: memory-crash STORE_DIR");
        std::process::exit(2);
    };
    let mnemo = match Mnemo::open(&PathBuf::from(dir), Config::default()) {
        Ok(mnemo) => mnemo,
        Err(error) => {
            eprintln!("memory-crash: cannot open: {error}");
            std::process::exit(1);
        }
    };
    mnemo.memory().set_models(MemoryModels { canonicalizer: Arc::new(Stuck), ..MemoryModels::default() });
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("memory-crash: no runtime: {error}");
            std::process::exit(1);
        }
    };
    let Ok(session) = SessionId::new("s1") else { std::process::exit(2) };
    let result = runtime.block_on(mnemo.memory().remember(&session, None));
    eprintln!("memory-crash: finished unexpectedly: {result:?}");
    std::process::exit(1);
}
