import ArgumentParser
import FerryCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `ferry engine`: the background engine that `ferry` and `ferry get/put` start when none runs. It leaves
/// the terminal's session, serves the control socket, and exits once it has had nothing to do and no
/// client for `[engine] linger` seconds, or when told to (`ferry stop`, the UI's stop key, SIGTERM).
struct BackgroundEngine: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "engine",
        abstract: "Run the engine in the background (started by ferry itself).",
        shouldDisplay: false
    )

    @OptionGroup var common: CommonOptions

    func run() async throws {
        setsid()
        signal(SIGHUP, SIG_IGN)
        let config = try common.loadConfig()
        let directory = common.stateDirectory
        let lock: EngineLock
        let store: SQLiteQueueStore
        switch try EngineStartup.begin(directory) {
        case .running:
            return  // another engine got there first: clients use it
        case let .engine(engineLock, queueStore):
            lock = engineLock
            store = queueStore
        }
        let relay = EventRelay()
        let hooks = HookRunner.make(settings: config.hooks, logPath: directory.logPath, store: store)
        let manager = try TransferManager(configuration: common.engineConfiguration(config), store: store) { event in
            hooks?.observe(event)
            relay.forward()
        }
        let host = try EngineHost(manager: manager, directory: directory) {
            Self.stop(manager, directory, reason: "stopped by a client")
        }
        relay.target = host
        Self.log("engine \(getpid()) serving \(directory.socketPath)")
        var sources: [DispatchSourceSignal] = []
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler { Self.stop(manager, directory, reason: "signal \(sig)") }
            source.resume()
            sources.append(source)
        }
        // Idle means nothing running, queued or waiting for a retry.
        let linger = config.linger
        var idleSince: Date?
        while true {
            try? await Task.sleep(for: .seconds(min(2, max(0.2, linger / 4))))
            if let notice = manager.newStoreFailureNotice() { Self.log(notice) }
            let busy = manager.snapshot().totals.count.contains { state, count in
                count > 0 && state.isPending
            }
            // A hook still running (or waiting its turn) keeps the engine, which watches its timeout.
            if busy || host.clients > 0 || hooks?.isIdle == false {
                idleSince = nil
                continue
            }
            let since = idleSince ?? Date()
            idleSince = since
            if Date().timeIntervalSince(since) >= linger, host.secondsWithoutClients >= linger {
                host.close()
                Self.stop(manager, directory, reason: "idle for \(Int(linger)) s with no client")
            }
            withExtendedLifetime((lock, sources)) {}
        }
    }

    /// Stops the transfers (their `.part` files stay) and exits; the socket goes first, so no client waits
    /// on an engine that is going.
    private static func stop(_ manager: TransferManager, _ directory: StateDirectory, reason: String) -> Never {
        log("engine \(getpid()) stopping: \(reason)")
        unlink(directory.socketPath)
        manager.shutdown(timeout: 5)
        Glibc.exit(0)
    }

    private static func log(_ line: String) {
        let stamp = ISO8601DateFormatter().string(from: Date())
        FileHandle.standardError.write(Data("\(stamp) \(line)\n".utf8))
    }
}
