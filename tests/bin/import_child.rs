//! Imports one file into a store and prints what the import reported, as JSON on one line. It
//! prints `opened` once the store is open, then `head N` each time the log's head moves, so the
//! import-kill test can kill it at a chosen point of the import's appends.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use mnemo::{Config, ImportFormat, Mnemo};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(file)) = (args.next(), args.next()) else {
        eprintln!("usage: import-child STORE_DIR FILE");
        std::process::exit(2);
    };
    let mnemo = match Mnemo::open(&PathBuf::from(dir), Config::default()) {
        Ok(mnemo) => mnemo,
        Err(error) => {
            eprintln!("import-child: cannot open: {error}");
            std::process::exit(1);
        }
    };
    let mnemo = Arc::new(mnemo);
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "opened");
    let _ = stdout.flush();
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (mnemo, done) = (Arc::clone(&mnemo), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut last = mnemo.log().head();
            while !done.load(Ordering::Relaxed) {
                let head = mnemo.log().head();
                if head != last {
                    let mut stdout = std::io::stdout().lock();
                    let _ = writeln!(stdout, "head {}", head.0);
                    let _ = stdout.flush();
                    last = head;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        })
    };
    let bytes = match std::fs::read(&file) {
        Ok(bytes) => bytes,
        Err(error) => {
            eprintln!("import-child: cannot read {file}: {error}");
            std::process::exit(1);
        }
    };
    let result = mnemo.import(&bytes, &file, ImportFormat::Auto);
    done.store(true, Ordering::Relaxed);
    let _ = watcher.join();
    match result {
        Ok(report) => {
            let _ = writeln!(stdout, "{}", serde_json::to_string(&report).unwrap_or_default());
        }
        Err(error) => {
            eprintln!("import-child: {error}");
            std::process::exit(1);
        }
    }
}
