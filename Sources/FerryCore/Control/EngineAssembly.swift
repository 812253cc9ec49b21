import FerryEngine
import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// An engine as a process runs it, put together in one place: the TransferManager on its store, the hooks
/// that follow its items, the control socket that others reach it by (when it works on a state directory),
/// and the handlers of SIGINT and SIGTERM. The background engine (`ferry engine`) and a headless run
/// (`ferry run`, `get/put --no-tui`) are both one; they differ only in what they do when told to stop.
public final class EngineAssembly: Sendable {
    public let manager: TransferManager
    /// Serves the control socket; nil for a private queue (no state directory) or when the socket could not
    /// be served (`socketProblem` says why).
    public let host: EngineHost?
    public let socketProblem: String?
    public let hooks: HookRunner?
    private let signals = Mutex<[DispatchSourceSignal]>([])

    /// - Parameters:
    ///   - directory: the state directory whose socket it serves; nil: none (a private queue).
    ///   - monitor: told of the engine's changes besides the hooks and the socket (a reporter, aria2's notifications).
    ///   - onStop: a client asked the engine to stop (`ferry stop`, the UI's stop key); called off the socket's
    ///     queue. It should shut the manager down and end the process.
    public init(configuration: EngineConfiguration, hookSettings: HookSettings, logPath: String?, store: any QueueStore,
                directory: StateDirectory?, scope: TransferManager.Scope,
                monitor: (any TransferMonitor)? = nil,
                onStop: @escaping @Sendable (TransferManager) -> Void) throws {
        let hooks = HookRunner.make(settings: hookSettings, logPath: logPath)
        // A private queue's changes are its own: they are not kept for the state directory's next engine.
        var configuration = configuration
        if directory == nil { configuration.liveSettingsPath = nil }
        let relay = SocketNudge()
        // The socket's subscribers hear of every change; the hooks follow transitions.
        let monitors: [(any TransferMonitor)?] = [hooks, monitor, relay]
        let manager = try TransferManager(configuration: configuration, store: store, scope: scope,
                                          monitor: CompositeMonitor(monitors.compactMap { $0 }))
        var host: EngineHost?
        var problem: String?
        if let directory {
            do {
                host = try EngineHost(manager: manager, directory: directory) { onStop(manager) }
            } catch {
                problem = error.description
            }
        }
        relay.host.withLock { $0 = host }
        self.manager = manager
        self.host = host
        self.socketProblem = problem
        self.hooks = hooks
    }

    /// SIGINT and SIGTERM call `handler` (off any queue) with the signal, instead of ending the process.
    public func onSignals(_ handler: @escaping @Sendable (Int32) -> Void) {
        signals.withLock { sources in
            for number in [SIGINT, SIGTERM] {
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler { handler(number) }
                source.resume()
                sources.append(source)
            }
        }
    }

    /// Nothing to do: nothing running, queued or waiting for a retry, no tree being walked, and no hook running or
    /// waiting its turn.
    public var idle: Bool {
        let busy = manager.counts.contains { state, count in count > 0 && state.isPending }
        return !busy && !manager.walking && hooks?.isIdle != false
    }

    /// Stops serving (clients see the socket close) and stops the transfers (their `.part` files stay).
    public func shutdown(timeout: TimeInterval = 5) {
        host?.close()
        manager.shutdown(timeout: timeout)
    }

    /// The signal handlers go (the default dispositions are not restored: the process is ending).
    public func stopHandlingSignals() {
        signals.withLock { sources in
            sources.forEach { $0.cancel() }
            sources.removeAll()
        }
    }
}

/// Tells the control socket's subscribers that something changed (they ask for what: EngineHost.nudge). An add
/// is nudged by the command that made it (EngineHost.carryOut), so adds are not heard here.
private final class SocketNudge: TransferMonitor {
    /// Set once the host is made (the engine may change things before).
    let host = Mutex<EngineHost?>(nil)
    func nudge() { host.withLock { $0 }?.nudge() }
    func transitioned(_ item: TransferSnapshot, from before: TransferState) { nudge() }
    func updated(_ item: TransferSnapshot) { nudge() }
    func removed(_ id: TransferID) { nudge() }
    func walked(_ walk: WalkProgress) { nudge() }
}
