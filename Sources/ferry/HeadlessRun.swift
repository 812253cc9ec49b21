import FerryCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Runs transfers without a UI, as the engine of the state directory: progress on stderr, results on stdout
/// (Reporter). It serves the control socket like any engine, so a UI can attach, the shell verbs work, and
/// another `ferry get --no-tui` can hand it items and follow them.
final class HeadlessRun: Sendable {
    private let configuration: EngineConfiguration
    private let hooks: HookSettings
    private let logPath: String

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
    /// With `readout`, progress is a readout redrawn in place in the terminal (LiveReadout), not lines.
    /// `tree`: the specs are a tree's, from there (Batch.tree).
    /// `walk`: a tree to walk (`get -r`) as the run's own batch; the run waits for the walk too, says its report
    /// when it ended, and ends with 1 when a directory could not be listed.
    func run(_ specs: [TransferSpec], walk: TreeJob? = nil, store: any QueueStore, directory: StateDirectory?, lock: EngineLock?,
             includeQueued: Bool = false, force: Bool = false, readout: Bool = false, tree: String? = nil) async -> Int32 {
        let reporter = Reporter(showsIDs: directory != nil, live: readout ? LiveReadout() : nil)
        let engine: EngineAssembly
        do {
            engine = try EngineAssembly(configuration: configuration, hookSettings: hooks, logPath: logPath, store: store,
                                        directory: directory, scope: includeQueued ? .everything : .ownItems,
                                        monitor: reporter,
                                        onStop: { manager in
                                            printError("stopped by `ferry stop`; partial files are kept")
                                            manager.shutdown()
                                            exit(1)
                                        })
        } catch {
            printError("cannot load the queue: \(error)")
            return 1
        }
        if let problem = engine.socketProblem { printError("\(problem); the queue cannot be reached from other shells") }
        let manager = engine.manager
        // SIGINT/SIGTERM: stop every attempt, keep the `.part` files, exit 130/143.
        engine.onSignals { number in
            reporter.live?.finish(summary: false)
            printError("interrupted: stopping; partial files are kept")
            engine.shutdown(timeout: 5)
            exit(128 + number)
        }
        let ticker = DispatchSource.makeTimerSource(queue: reporter.output)
        ticker.schedule(deadline: .now() + reporter.progressInterval, repeating: reporter.progressInterval)
        ticker.setEventHandler { [reporter] in
            reporter.progress(manager.snapshot(QueueView(states: reporter.live != nil ? [.running, .waiting] : [.running])).items)
            if let notice = manager.newStoreFailureNotice() { printError("warning: \(notice)") }
        }
        ticker.resume()

        /// No more serving: the queue is free for another engine at once.
        func stopServing() {
            ticker.cancel()
            engine.shutdown()
            lock?.release()
        }
        var own: [TransferID]
        var walked: Int64?
        do {
            if let walk {
                own = []
                walked = try manager.perform(.walk(walk)).batch
            } else if specs.isEmpty {
                own = []
            } else {
                // The same add as through the socket: one batch, the same transfers reused unless forced.
                let added = try manager.perform(.add(.init(specs: specs, typed: typedCommand(), force: force, replaces: force, tree: tree))).added ?? []
                reporter.added(added)
                own = added.map(\.id)
                reporter.live?.expect(own.count)
            }
        } catch {
            printError(String(describing: error))
            stopServing()
            engine.stopHandlingSignals()
            return 2
        }
        // The work of this engine's scope: its own items, and those added, resumed or retried through its socket
        // meanwhile (whoever asked may be following them); with `includeQueued`, everything queued.
        // A walk adds files as it goes: when nothing is left to do, the run waits for the walks, then looks again.
        var waited = Set<TransferID>()
        while true {
            let left = manager.workLeft()
            if left.isEmpty {
                guard manager.walking else { break }
                await manager.waitUntilWalksStop()
                continue
            }
            waited.formUnion(left)
            reporter.live?.expect(waited.count)
            await manager.waitUntilFinished(left)
        }
        var walkFailed = false
        if let walked {
            own = manager.ids(inBatch: walked)
            if let progress = manager.walks.first(where: { $0.batch == walked }) {
                reporter.output.sync {}
                printErrors(progress.report)
                walkFailed = progress.failed > 0 || !progress.ended
            }
        }
        stopServing()
        // The hooks of the items just ended run to their end (each to its timeout at most) before this process goes.
        engine.hooks?.waitUntilIdle()
        engine.stopHandlingSignals()
        reporter.output.sync {}
        // The whole queue's run: also what ended before the first look at the work left (an item resumed from its
        // .part file can be done by then: its path went unsaid). The engine's events are drained by now.
        let ids = includeQueued ? waited.union(reporter.ended) : Set(own)
        let status = reporter.results(ids: ids) { manager.snapshot(QueueView(ids: $0)).items }
        return walkFailed ? max(status, 1) : status
    }
}
