import FerryEngine
import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// `[hooks]`: commands run when an item ends, as aria2's --on-download-complete.
public struct HookSettings: Sendable, Equatable {
    /// The program and its arguments run when an item completes; nil: none.
    public var onDone: [String]?
    /// The same when an item fails for good (after its retries).
    public var onFailed: [String]?
    /// Seconds a hook may run before it is stopped (SIGTERM, then SIGKILL 2 s later).
    public var timeout = 60.0

    public init() {}

    public var isEmpty: Bool { onDone == nil && onFailed == nil }

    /// Splits a command line into words as a shell would: blanks separate words, '...' keeps everything,
    /// "..." keeps everything but \" \\ \$ \`, and a backslash outside quotes keeps the next character.
    /// Nothing else of a shell: no variables, globs, pipes or redirections.
    public static func words(_ text: String) throws(UsageError) -> [String] {
        var words: [String] = []
        var word = ""
        var inWord = false
        var chars = text[...]
        while let c = chars.popFirst() {
            switch c {
            case " ", "\t", "\n", "\r":
                if inWord { words.append(word); word = ""; inWord = false }
            case "'":
                inWord = true
                guard let end = chars.firstIndex(of: "'") else { throw UsageError("a ' is not closed") }
                word += chars[..<end]
                chars = chars[chars.index(after: end)...]
            case "\"":
                inWord = true
                var closed = false
                while let d = chars.popFirst() {
                    if d == "\"" { closed = true; break }
                    if d == "\\", let next = chars.first, "\"\\$`".contains(next) {
                        word.append(next)
                        chars = chars.dropFirst()
                    } else {
                        word.append(d)
                    }
                }
                guard closed else { throw UsageError("a \" is not closed") }
            case "\\":
                inWord = true
                guard let next = chars.popFirst() else { throw UsageError("a \\ ends the command") }
                word.append(next)
            default:
                inWord = true
                word.append(c)
            }
        }
        if inWord { words.append(word) }
        return words
    }
}

/// Runs the hooks of an engine: when an item's state becomes completed (or failed), its command starts in a
/// process of its own, with no shell, the item described in environment variables, its output appended to
/// the engine's log. The queue never waits for a hook: hooks start from the engine's event queue and are
/// watched on threads of their own (at most `parallel` at once, the rest wait their turn in order); one that
/// runs past the timeout is stopped with its process group.
public final class HookRunner: TransferMonitor {
    public static let parallel = 4

    private struct Job: Sendable {
        var name: String
        var command: [String]
        var environment: [String: String]
        var id: TransferID
    }

    private struct State {
        var pending: [Job] = []
        var running = 0
    }

    private let settings: HookSettings
    private let logPath: String?
    private let state = Mutex(State())
    private let idle = NSCondition()

    /// `logPath`: where hooks' output and their exits are written (nil: discarded).
    public init(settings: HookSettings, logPath: String?) {
        self.settings = settings
        self.logPath = logPath
        // An engine started by a client that ignores SIGCHLD (so it leaves no zombie) inherits the ignore,
        // and then the kernel reaps hooks before waitpid can read how they ended.
        if !settings.isEmpty { signal(SIGCHLD, SIG_DFL) }
    }

    /// The runner for an engine; nil when no hook is set.
    public static func make(settings: HookSettings, logPath: String?) -> HookRunner? {
        guard !settings.isEmpty else { return nil }
        return HookRunner(settings: settings, logPath: logPath)
    }

    /// A hook runs when an item becomes completed or failed, once (the engine tells each transition once; an
    /// item loaded done is no transition). Told on the manager's serial event queue.
    public func transitioned(_ item: TransferSnapshot, from before: TransferState) {
        let (id, newState) = (item.id, item.state)
        let name: String, command: [String]?
        switch newState {
        case .completed: (name, command) = ("on_done", settings.onDone)
        case .failed: (name, command) = ("on_failed", settings.onFailed)
        default: return
        }
        guard let command else { return }
        let job = Job(name: name, command: command, environment: Self.environment(for: item), id: id)
        let start: Job? = state.withLock { state in
            guard state.running < Self.parallel else {
                state.pending.append(job)
                return nil
            }
            state.running += 1
            return job
        }
        if let start { launch(start) }
    }

    /// No hook runs or waits its turn.
    public var isIdle: Bool { state.withLock { $0.running == 0 && $0.pending.isEmpty } }

    /// Waits until no hook runs or waits (a headless run does before it exits). Every hook ends by its
    /// timeout, so this ends too; `timeout` bounds it further (nil: no bound).
    public func waitUntilIdle(timeout: TimeInterval? = nil) {
        let deadline = timeout.map { Date().addingTimeInterval($0) }
        idle.lock()
        defer { idle.unlock() }
        while !isIdle {
            // (Foundation traps on wait(until: .distantFuture): no deadline is a plain wait.)
            guard let deadline else {
                idle.wait()
                continue
            }
            guard idle.wait(until: deadline) else { return }
        }
    }

    /// What a hook is told about its item. The URL loses its credentials; the rest is the engine's own.
    static func environment(for item: TransferSnapshot) -> [String: String] {
        var values = [
            "FERRY_ID": String(item.id.rawValue),
            "FERRY_DIRECTION": item.spec.direction.rawValue,
            "FERRY_URL": TerminalSafe.redactedURL(item.spec.url),
            "FERRY_STATUS": item.state == .completed ? "done" : "failed",
            "FERRY_BYTES": String(item.bytesDone),
        ]
        switch item.spec.direction {
        case .download:
            if let path = item.savedPath ?? item.fileName.map({ item.spec.directory + "/" + $0 }) { values["FERRY_PATH"] = path }
        case .upload:
            switch item.spec.upload?.primarySource {
            case let .file(path)?: values["FERRY_PATH"] = path
            case .standardInput?: values["FERRY_PATH"] = "-"
            case nil: break
            }
        }
        if let status = item.lastStatus { values["FERRY_HTTP_STATUS"] = String(status) }
        if item.state == .failed, let error = item.lastError { values["FERRY_ERROR"] = TerminalSafe.sanitize(error) }
        // What the failure is, for a script to test (FailureKind's raw value: `http`, `refused`, `disk-full`...).
        if item.state == .failed, let failure = item.failure { values["FERRY_ERROR_KIND"] = failure.kind.rawValue }
        return values
    }

    // MARK: Processes

    private func launch(_ job: Job) {
        let thread = Thread { [self] in
            run(job)
            let next: Job? = state.withLock { state in
                guard !state.pending.isEmpty else {
                    state.running -= 1
                    return nil
                }
                return state.pending.removeFirst()
            }
            if let next {
                launch(next)
            } else {
                idle.lock()
                idle.broadcast()
                idle.unlock()
            }
        }
        thread.name = "ferry.hook"
        thread.start()
    }

    private func run(_ job: Job) {
        let label = "hook \(job.name) \(job.id)"
        // The monotonic clock: a change of the wall clock neither kills a hook early nor spares it.
        let started = DispatchTime.now()
        func elapsed() -> Double { Double(DispatchTime.now().uptimeNanoseconds - started.uptimeNanoseconds) / 1e9 }
        let pid: pid_t
        switch spawn(job) {
        case let .success(child): pid = child
        case let .failure(error):
            log("\(label): cannot run \(TerminalSafe.sanitize(job.command[0])): \(error)")
            return
        }
        log("\(label): started \(TerminalSafe.sanitize(job.command[0])) (pid \(pid))")
        var status: Int32 = 0
        var ended = false
        var stopped = false
        while !ended {
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid || (result < 0 && errno != EINTR) {
                ended = true
                if result < 0 { status = -1 }
                break
            }
            if elapsed() >= settings.timeout && !stopped {
                stopped = true
                // The hook's whole process group: a script's children go with it.
                kill(-pid, SIGTERM)
                let grace = elapsed() + 2
                while waitpid(pid, &status, WNOHANG) == 0, elapsed() < grace { usleep(20_000) }
                kill(-pid, SIGKILL)
                _ = waitpid(pid, &status, 0)
                ended = true
                break
            }
            usleep(20_000)
        }
        let seconds = String(format: "%.1f", elapsed())
        if stopped {
            log("\(label): killed after \(seconds) s (timeout \(Self.format(settings.timeout)) s)")
        } else if status == -1 {
            log("\(label): ended after \(seconds) s (exit status unknown)")
        } else if status & 0x7f == 0 {
            log("\(label): exit \((status >> 8) & 0xff) after \(seconds) s")
        } else {
            log("\(label): ended by signal \(status & 0x7f) after \(seconds) s")
        }
    }

    private static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
    }

    /// The hook's process (Spawn: no shell, a process group of its own, default signal handling, standard input
    /// from /dev/null, output appended to the log, none of the engine's other descriptors).
    private func spawn(_ job: Job) -> Result<pid_t, Spawn.Failure> {
        var environment = ProcessInfo.processInfo.environment
        environment.merge(job.environment) { $1 }
        do throws(Spawn.Failure) {
            return .success(try Spawn.start(job.command, environment: environment, output: logPath))
        } catch {
            return .failure(error)
        }
    }

    /// One line to the log (appended whole, so lines from several hooks do not interleave).
    private func log(_ line: String) {
        guard let logPath else { return }
        let stamp = ISO8601DateFormatter().string(from: Date())
        let fd = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        let text = "\(stamp) \(line)\n"
        _ = text.withCString { write(fd, $0, strlen($0)) }
        close(fd)
    }
}
