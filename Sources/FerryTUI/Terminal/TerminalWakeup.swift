import Dispatch
import Synchronization

/// Wakes the UI from any thread: a remote queue's change callback (a serial background queue) calls `nudge()`, and the
/// app's handler runs once on the main queue. Nudges that arrive before that run coalesce into one, so a burst of
/// engine events (a long queue handed over at once) costs one hop, not one per event.
@MainActor
public final class TerminalWakeup {
    private nonisolated let pending = Atomic<Bool>(false)
    /// Set by the app once it runs; nudges before that find nothing to wake (the app draws its first frame anyway).
    var handler: (() -> Void)?

    public nonisolated init() {}

    /// Safe from any thread, never blocks.
    public nonisolated func nudge() {
        guard !pending.exchange(true, ordering: .acquiringAndReleasing) else { return }
        DispatchQueue.main.async {
            MainActor.assumeIsolated {
                // Cleared before the handler runs: a change during the handler nudges again.
                self.pending.store(false, ordering: .releasing)
                self.handler?()
            }
        }
    }
}
