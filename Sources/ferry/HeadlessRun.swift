import FerryCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Runs transfers without a UI, as the engine of the state directory: progress on stderr, results on stdout
/// (Reporter). It serves the control socket like any engine, so a UI can attach, the shell verbs work, and
/// another `ferry get --no-tui` can hand it items and follow them.
final class HeadlessRun: Sendable {
    private let configuration: EngineConfiguration
    private let hooks: HookSettings
    private let logPath: String
    private let reporter = Reporter()

    /// `hooks` run as items end, their output going to `logPath` (the state directory's engine log).
    init(configuration: EngineConfiguration, hooks: HookSettings, logPath: String) {
        self.configuration = configuration
        self.hooks = hooks
        self.logPath = logPath
    }

    /// `specs` are added to the queue as one batch (a transfer already queued is reused unless `force`), and
    /// the run works on them and waits for them and for any items added or resumed through the socket
    /// meanwhile; every other item keeps its state and its `.part` file. With `includeQueued` (`ferry run`)
    /// it works through the whole queue. Returns the exit status: 0 when every waited-for item succeeded, 1
    /// otherwise. Without a directory (a private queue) no socket is served.
    func run(_ specs: [TransferSpec], store: any QueueStore, directory: StateDirectory?, lock: EngineLock?,
             includeQueued: Bool = false, force: Bool = false) async -> Int32 {
        let relay = EventRelay()
        let hookRunner = HookRunner.make(settings: hooks, logPath: logPath, store: store)
        let manager: TransferManager
        do {
            manager = try TransferManager(configuration: configuration, store: store,
                                          scope: includeQueued ? .everything : .ownItems) { [reporter] event in
                hookRunner?.observe(event)
                reporter.stateChanged(event.snapshot)
                relay.forward()
            }
        } catch {
            printError("cannot load the queue: \(error)")
            return 1
        }
        var host: EngineHost?
        if let directory {
            do {
                host = try EngineHost(manager: manager, directory: directory) {
                    printError("stopped by `ferry stop`; partial files are kept")
                    manager.shutdown()
                    exit(1)
                }
            } catch {
                printError("\(error); the queue cannot be reached from other shells")
            }
        }
        relay.target = host
        let stop = Self.installSignalHandlers(manager, host: host)
        let ticker = DispatchSource.makeTimerSource(queue: reporter.output)
        ticker.schedule(deadline: .now() + 1, repeating: 1)
        ticker.setEventHandler { [reporter] in
            reporter.progress(manager.snapshot().items)
            if let notice = manager.newStoreFailureNotice() { printError("warning: \(notice)") }
        }
        ticker.resume()

        var waitFor = Set<TransferID>()
        if includeQueued {
            waitFor = Set(manager.snapshot().items.filter { !$0.state.isTerminal && $0.state != .paused }.map(\.id))
        }
        /// No more serving: the queue is free for another engine at once.
        func stopServing() {
            ticker.cancel()
            host?.close()
            manager.shutdown()
            lock?.release()
        }
        let own: [TransferID]
        do {
            if specs.isEmpty {
                own = []
            } else {
                let batch = try manager.makeBatch(command: typedCommand())
                let added = try manager.addSaved(specs, batch: batch.id, reuse: !force)
                reporter.added(added)
                own = added.map(\.id)
            }
        } catch {
            printError(error.description)
            stopServing()
            stop.forEach { $0.cancel() }
            return 2
        }
        waitFor.formUnion(own)
        // Items added through the socket while this engine ran are finished too before it exits: whoever added
        // them may be following them.
        while true {
            await manager.waitUntilFinished(waitFor)
            let more = (host?.asked.withLock { $0 } ?? []).subtracting(waitFor)
            if more.isEmpty { break }
            waitFor.formUnion(more)
        }
        stopServing()
        // The hooks of the items just ended run to their end (each to its timeout at most) before this process goes.
        hookRunner?.waitUntilIdle()
        stop.forEach { $0.cancel() }
        reporter.output.sync {}
        return reporter.results(manager.snapshot(), ids: includeQueued ? waitFor : Set(own))
    }

    /// SIGINT/SIGTERM: stop every attempt, keep the `.part` files, exit 130/143.
    private static func installSignalHandlers(_ manager: TransferManager, host: EngineHost?) -> [DispatchSourceSignal] {
        [(SIGINT, Int32(130)), (SIGTERM, Int32(143))].map { signalNumber, code in
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler {
                printError("interrupted: stopping; partial files are kept")
                host?.close()
                manager.shutdown(timeout: 5)
                exit(code)
            }
            source.resume()
            return source
        }
    }
}

/// Hands the engine's events to its host, which is made after the engine (the host needs the engine; the
/// engine's event callback is fixed when it is made).
final class EventRelay: Sendable {
    private let host = Mutex<EngineHost?>(nil)

    var target: EngineHost? {
        get { host.withLock { $0 } }
        set { host.withLock { $0 = newValue } }
    }

    func forward() { target?.nudge() }
}
