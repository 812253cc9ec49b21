import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Starting a program, the one way ferry does it (the background engine, the hooks, the tests' children): posix_spawn with no
/// shell, in a process group of its own (a Ctrl-C in the terminal is not for it), every signal's handling
/// back to its default and none blocked (an ignored SIGCHLD is inherited across exec: an engine started by a
/// client that ignores it, so it leaves no zombie, had the kernel reap its hooks before waitpid could read how
/// they ended), standard input from /dev/null, standard output and error appended to one file, and none of
/// this process's other descriptors (a pipe from whoever ran ferry stays open as long as the child otherwise).
public enum Spawn {
    public struct Failure: Error, CustomStringConvertible {
        public let code: Int32
        public var description: String { String(cString: strerror(code)) }
    }

    /// Where a child's standard stream (0, 1 or 2) comes from or goes.
    public enum Stream: Sendable {
        case devNull
        /// A file opened in the child for appending (created 0600).
        case append(String)
        /// A descriptor (this process's, or one placed for the child by a stream before it: `.descriptor(1)` for
        /// standard error is "where standard output goes").
        case descriptor(Int32)
    }

    /// Starts `arguments` (its first word the program's name; `program`, else that word, is what runs: a path,
    /// or a name looked up in PATH) with `environment` (nil: this process's), its output appended to `output`
    /// (created 0600; nil: discarded). Its pid.
    public static func start(_ arguments: [String], program: String? = nil, environment: [String: String]? = nil,
                             output: String?) throws(Failure) -> pid_t {
        try start(arguments, program: program, environment: environment,
                  streams: [.devNull, output.map { .append($0) } ?? .devNull, .descriptor(1)])
    }

    /// Starts `arguments` with `streams` as its standard input, output and error, in `directory` (nil: this
    /// process's), every signal's handling back to its default unless `defaultSignals` is false (then they are
    /// inherited: the tests' children ignore SIGPIPE as the test process does). Its pid. In a process group of its
    /// own; with `newSession`, in a session of its own too, without a controlling terminal (ssh: it can never open
    /// the user's terminal to ask something).
    public static func start(_ arguments: [String], program: String? = nil, environment: [String: String]? = nil,
                             streams: [Stream], directory: String? = nil, defaultSignals: Bool = true,
                             newSession: Bool = false) throws(Failure) -> pid_t {
        precondition(!arguments.isEmpty, "a program to start")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for (slot, stream) in streams.prefix(3).enumerated() {
            let fd = Int32(slot)
            let result: Int32
            switch stream {
            case .devNull: result = posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", slot == 0 ? O_RDONLY : O_WRONLY, 0)
            case let .append(path): result = posix_spawn_file_actions_addopen(&actions, fd, path, O_WRONLY | O_CREAT | O_APPEND, 0o600)
            case let .descriptor(from): result = posix_spawn_file_actions_adddup2(&actions, from, fd)
            }
            guard result == 0 else { throw Failure(code: result) }
        }
        closeFrom3(&actions)
        if let directory {
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addchdir_np") else {
                throw Failure(code: ENOSYS)
            }
            typealias Chdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
            let result = unsafeBitCast(symbol, to: Chdir.self)(&actions, directory)
            guard result == 0 else { throw Failure(code: result) }
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t()
        sigfillset(&all)
        var none = sigset_t()
        sigemptyset(&none)
        // glibc's POSIX_SPAWN_SETSID (0x80), which the Glibc module leaves out; a session leader's group is its own.
        var flags = newSession ? 0x80 : POSIX_SPAWN_SETPGROUP
        if defaultSignals {
            posix_spawnattr_setsigdefault(&attributes, &all)
            posix_spawnattr_setsigmask(&attributes, &none)
            flags |= POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK
        }
        if !newSession { posix_spawnattr_setpgroup(&attributes, 0) }
        posix_spawnattr_setflags(&attributes, Int16(flags))
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer {
            argv.forEach { free($0) }
            envp?.forEach { free($0) }
        }
        var pid: pid_t = 0
        let program = program ?? arguments[0]
        let result: Int32 = envp.map { envp in
            program.contains("/") ? posix_spawn(&pid, program, &actions, &attributes, argv, envp)
                : posix_spawnp(&pid, program, &actions, &attributes, argv, envp)
        } ?? (program.contains("/") ? posix_spawn(&pid, program, &actions, &attributes, argv, environ)
                : posix_spawnp(&pid, program, &actions, &attributes, argv, environ))
        guard result == 0 else { throw Failure(code: result) }
        return pid
    }

    /// Closes every descriptor above 2 in the child (glibc 2.34's closefrom action, looked up at run time as
    /// Swift's Glibc module does not declare it); without it, every descriptor not marked close-on-exec now.
    private static func closeFrom3(_ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
            let closeFrom = unsafeBitCast(symbol, to: CloseFrom.self)
            if closeFrom(&actions, 3) == 0 { return }
        }
        if let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            for fd in entries.compactMap(Int32.init) where fd > 2 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        }
    }
}
