import ArgumentParser
import FerryCore
import FerryRPC
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
    @Flag(name: .customLong("rpc"), help: "Answer aria2's JSON-RPC as [rpc] enable = true does (the rest of [rpc] applies).")
    var rpc = false

    func run() async throws {
        setsid()
        signal(SIGHUP, SIG_IGN)
        var config = try common.loadConfig()
        if rpc { config.rpc.enable = true }
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
        // aria2's notifications follow the engine's events when its RPC is on.
        let notifier = config.rpc.enable ? Aria2Notifier() : nil
        let engine = try EngineAssembly(configuration: common.engineConfiguration(config), hookSettings: config.hooks,
                                        logPath: directory.logPath, store: store, directory: directory, scope: .everything,
                                        monitor: notifier,
                                        onStop: { manager in Self.stop(directory, reason: "stopped by a client") { manager.shutdown(timeout: 5) } })
        if let problem = engine.socketProblem { throw StateError(problem) }
        let manager = engine.manager
        let host = engine.host!
        Self.log("engine \(getpid()) serving \(directory.socketPath)")
        engine.onSignals { number in Self.stop(directory, reason: "signal \(number)") { engine.shutdown() } }
        // aria2's RPC, when the config turns it on: its clients expect an engine that stays.
        var rpcServer: RPCServer?
        let rpcURL = "http://\(config.rpc.listen.contains(":") ? "[\(config.rpc.listen)]" : config.rpc.listen):\(config.rpc.port)/jsonrpc"
        var listener = RPCListener(pid: getpid(), url: nil, failure: nil)
        if config.rpc.enable {
            do {
                let secret = try config.rpc.secret(stateDirectory: directory.path)
                let rpc = Aria2RPC(manager: manager, secret: secret,
                                   defaultDirectory: config.unattendedDownloadDirectory()) {
                    Self.stop(directory, reason: "aria2.shutdown over RPC") { engine.shutdown() }
                }
                rpcServer = try RPCServer(rpc: rpc, notifier: notifier, host: config.rpc.listen, port: config.rpc.port,
                                          allowOrigin: config.rpc.allowOrigin)
                Self.log("engine \(getpid()) answering aria2 RPC on \(rpcURL)")
                listener.url = rpcURL
            } catch {
                Self.log("aria2 RPC is off: cannot listen on \(config.rpc.listen):\(config.rpc.port): \(error)")
                listener.failure = "cannot listen on \(config.rpc.listen):\(config.rpc.port): \(error)"
            }
        }
        // For `ferry rpc`: what this engine does about the RPC.
        listener.write(stateDirectory: directory.path)
        // Idle means nothing running, queued or waiting for a retry, and no hook running (it keeps the engine,
        // which watches its timeout).
        let linger = config.linger
        var idleSince: Date?
        while true {
            try? await Task.sleep(for: .seconds(min(2, max(0.2, linger / 4))))
            if let notice = manager.newStoreFailureNotice() { Self.log(notice) }
            if !engine.idle || host.clients > 0 || rpcServer != nil {
                idleSince = nil
                continue
            }
            let since = idleSince ?? Date()
            idleSince = since
            if Date().timeIntervalSince(since) >= linger, host.secondsWithoutClients >= linger {
                Self.stop(directory, reason: "idle for \(Int(linger)) s with no client") { engine.shutdown() }
            }
            withExtendedLifetime(lock) {}
        }
    }

    /// Stops the transfers with `shutdown` (their `.part` files stay) and exits; the socket file goes first,
    /// so no client waits on an engine that is going.
    private static func stop(_ directory: StateDirectory, reason: String, shutdown: () -> Void) -> Never {
        log("engine \(getpid()) stopping: \(reason)")
        unlink(directory.socketPath)
        shutdown()
        Glibc.exit(0)
    }

    private static func log(_ line: String) {
        let stamp = ISO8601DateFormatter().string(from: Date())
        Output.error("\(stamp) \(line)\n")
    }
}
