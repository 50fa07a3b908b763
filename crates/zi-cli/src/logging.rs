//! zi's own diagnostics: `tracing` events on stderr, filtered by `ZI_LOG` (docs/cli.md).

use std::sync::OnceLock;

use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber, span};
use tracing_subscriber::EnvFilter;

/// Installs the stderr subscriber: `ZI_LOG`'s filter when it is set and valid, else warnings
/// and errors only.
pub fn init() {
    let _ = match EnvFilter::try_from_env("ZI_LOG") {
        Ok(filter) => tracing::subscriber::set_global_default(stderr_subscriber(filter)),
        Err(_) => tracing::subscriber::set_global_default(OnFirstWarning::default()),
    };
}

fn stderr_subscriber(filter: EnvFilter) -> impl Subscriber + Send + Sync {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .without_time()
        .with_target(false)
        .with_ansi(false)
        .finish()
}

/// The default filter's subscriber, built when the first warning or error is reached.
///
/// An idle agent usually emits none, and the formatting subscriber costs memory at once (its
/// span registry alone is 32 KiB) and code pages (docs/performance.md#start-up-and-idle-memory).
/// The level hint is given without building it, so `debug!` and `info!` call sites stay
/// disabled without asking; a `warn!` or `error!` builds it and everything after goes to it.
/// zi opens no spans, so `current_span` keeps the trait's answer (unknown).
#[derive(Default)]
struct OnFirstWarning {
    inner: OnceLock<Box<dyn Subscriber + Send + Sync>>,
}

impl OnFirstWarning {
    fn inner(&self) -> &(dyn Subscriber + Send + Sync) {
        self.inner
            .get_or_init(|| Box::new(stderr_subscriber(EnvFilter::new("warn"))))
            .as_ref()
    }
}

impl Subscriber for OnFirstWarning {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        self.inner().register_callsite(metadata)
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.inner().enabled(metadata)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::WARN)
    }

    fn new_span(&self, span: &span::Attributes<'_>) -> span::Id {
        self.inner().new_span(span)
    }

    fn record(&self, span: &span::Id, values: &span::Record<'_>) {
        self.inner().record(span, values);
    }

    fn record_follows_from(&self, span: &span::Id, follows: &span::Id) {
        self.inner().record_follows_from(span, follows);
    }

    fn event_enabled(&self, event: &Event<'_>) -> bool {
        self.inner().event_enabled(event)
    }

    fn event(&self, event: &Event<'_>) {
        self.inner().event(event);
    }

    fn enter(&self, span: &span::Id) {
        self.inner().enter(span);
    }

    fn exit(&self, span: &span::Id) {
        self.inner().exit(span);
    }

    fn clone_span(&self, id: &span::Id) -> span::Id {
        self.inner().clone_span(id)
    }

    fn try_close(&self, id: span::Id) -> bool {
        self.inner().try_close(id)
    }
}
