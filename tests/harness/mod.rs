//! The harness of test binaries that need an outside program (a Valkey or Redis server, the
//! `openssl` CLI): libtest-mimic instead of libtest, because only a harness that decides at run
//! time can report a test as *ignored* — libtest's `#[ignore]` is fixed at compile time, and a
//! test that returns early shows as "ok" with its "SKIPPED" line in captured output.
//!
//! A test calls [`skip`] when what it needs is missing: outside CI the harness reports it
//! `ignored, <why>` (visible without `--nocapture`, and counted in the summary); under
//! `CI=true` it fails. The binary's `main` lists its tests with [`multi`], [`current`] and
//! [`plain`] (the same runtimes `#[tokio::test]` and `#[test]` gave them) and hands them to
//! [`run`].

#![allow(dead_code, unreachable_pub)]

use std::any::Any;
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;

use libtest_mimic::{Arguments, Completion, Trial};

/// The payload of a [`skip`]: unwound to the harness, which reports the test ignored.
struct Skipped(String);

/// Whether this run is CI (`CI=true`), where a missing program fails instead of skipping.
pub fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Ends the current test as skipped because `why` (outside CI), or fails it (under `CI=true`).
pub fn skip(why: &str) -> ! {
    if in_ci() {
        panic!("this test needs what CI must provide: {why}");
    }
    panic::panic_any(Skipped(why.to_owned()))
}

/// Runs `body`, turning a [`skip`] into an ignored outcome; any other panic fails the test.
fn outcome(body: impl FnOnce()) -> Result<Completion, libtest_mimic::Failed> {
    match panic::catch_unwind(AssertUnwindSafe(body)) {
        Ok(()) => Ok(Completion::Completed),
        Err(payload) => match payload.downcast::<Skipped>() {
            Ok(skipped) => Ok(Completion::ignored_with(skipped.0)),
            Err(other) => Err(panic_message(&*other).into()),
        },
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        format!("test panicked: {s}")
    } else if let Some(s) = payload.downcast_ref::<String>() {
        format!("test panicked: {s}")
    } else {
        "test panicked".to_owned()
    }
}

/// A test run on a multi-thread tokio runtime with two workers
/// (`#[tokio::test(flavor = "multi_thread", worker_threads = 2)]`).
pub fn multi<F>(name: &str, test: fn() -> F) -> Trial
where
    F: Future<Output = ()> + 'static,
{
    Trial::ignorable_test(name.replace(" :: ", "::"), move || {
        outcome(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("a tokio runtime")
                .block_on(test())
        })
    })
}

/// A test run on a current-thread tokio runtime (`#[tokio::test]`).
pub fn current<F>(name: &str, test: fn() -> F) -> Trial
where
    F: Future<Output = ()> + 'static,
{
    Trial::ignorable_test(name.replace(" :: ", "::"), move || {
        outcome(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime")
                .block_on(test())
        })
    })
}

/// A synchronous test (`#[test]`).
pub fn plain(name: &str, test: fn()) -> Trial {
    Trial::ignorable_test(name.replace(" :: ", "::"), move || outcome(test))
}

/// Runs the binary's tests; a skip's panic message is kept out of the output (the harness
/// prints the reason on the test's line instead).
pub fn run(trials: Vec<Trial>) -> ExitCode {
    let default_hook = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<Skipped>().is_none() {
            default_hook(info);
        }
    }));
    libtest_mimic::run(&Arguments::from_args(), trials).exit_code()
}

/// `name => path` pairs: a trial named after the test function's path.
#[macro_export]
macro_rules! trials {
    ($($kind:ident $($path:ident)::+),* $(,)?) => {
        vec![$($crate::harness::$kind(stringify!($($path)::+), $($path)::+)),*]
    };
}
