import ArgumentParser
import FerryCore
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Finding the engine of a state directory: this process becomes it (it got the lock), or another one runs
/// and this process talks to it through its control socket.
enum EngineStartup {
    enum Outcome {
        case engine(EngineLock, SQLiteQueueStore)
        case running(ControlClient)
    }

    /// An engine that holds the lock listens within moments; a lock held longer without a socket is an engine
    /// that does not answer.
    static func begin(_ directory: StateDirectory) throws(StateError) -> Outcome {
        try directory.prepare()
        let store = try directory.openStore()
        var tries = 0
        while true {
            switch try EngineLock.acquire(directory) {
            case let .acquired(lock):
                // The lock's holder alone journals claims, after replaying what a crashed engine left.
                try store.journalClaims()
                return .engine(lock, store)
            case let .heldBy(pid):
                if let client = ControlClient.connect(directory) { return .running(client) }
                tries += 1
                guard tries < 50 else {
                    let who = pid.map { "ferry (pid \($0))" } ?? "another ferry"
                    throw StateError("\(who) holds the queue in \(directory.path) but does not answer on \(directory.socketPath)")
                }
                usleep(100_000)
            }
        }
    }

    /// A connection to the running engine; when none runs, a background engine is started (detached from
    /// this terminal, with this command's options) and connected to. `started`: the engine is this command's.
    static func attach(_ common: CommonOptions) throws -> ControlClient {
        try attaching(common).client
    }

    static func attaching(_ common: CommonOptions) throws -> (client: ControlClient, started: Bool) {
        let directory = common.stateDirectory
        switch try begin(directory) {
        case let .running(client):
            return (client, false)
        case let .engine(lock, _):
            lock.release()
            try spawnBackgroundEngine(common)
            for _ in 0..<100 {
                if let client = ControlClient.connect(directory) { return (client, true) }
                usleep(100_000)
            }
            throw StateError("the background engine did not start; see \(directory.logPath)")
        }
    }

    /// `ferry engine` in a session of its own, stdin from /dev/null, stdout and stderr to the state
    /// directory's log (cut when it grows past 1 MiB).
    private static func spawnBackgroundEngine(_ common: CommonOptions) throws(StateError) {
        let directory = common.stateDirectory
        var st = stat()
        if stat(directory.logPath, &st) == 0, st.st_size > 1 << 20 { _ = rename(directory.logPath, directory.logPath + ".1") }
        var executable = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &executable, Int(PATH_MAX))
        guard length > 0 else { throw StateError("cannot find ferry's own executable to start an engine") }
        let path = String(decoding: executable[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var arguments = ["ferry", "engine", "--state-dir", directory.path]
        if let config = common.config { arguments += ["--config", config] }
        if let jobs = common.jobs { arguments += ["-j", String(jobs)] }
        if let retries = common.retries { arguments += ["--retries", String(retries)] }

        // Spawn gives it nothing of this process but /dev/null and the log (a pipe inherited from whoever ran
        // this ferry would otherwise stay open as long as the engine runs), a process group of its own at once (a
        // Ctrl-C in this terminal is not for it; `ferry engine` then makes its own session, leaving the terminal
        // behind) and default signal handling (the ignored SIGCHLD below is this process's alone).
        // The engine outlives this process; while both run, nobody waits for it, so no zombie is left.
        signal(SIGCHLD, SIG_IGN)
        do throws(Spawn.Failure) {
            _ = try Spawn.start(arguments, program: path, output: directory.logPath)
        } catch {
            throw StateError("cannot start the background engine: \(error)")
        }
    }
}
