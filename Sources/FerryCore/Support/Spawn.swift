import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Starting a program, the one way ferry does it (the background engine, the hooks): posix_spawn with no
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

    /// Starts `arguments` (its first word the program's name; `program`, else that word, is what runs: a path,
    /// or a name looked up in PATH) with `environment` (nil: this process's), its output appended to `output`
    /// (created 0600; nil: discarded). Its pid.
    public static func start(_ arguments: [String], program: String? = nil, environment: [String: String]? = nil,
                             output: String?) throws(Failure) -> pid_t {
        precondition(!arguments.isEmpty, "a program to start")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output ?? "/dev/null", O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        closeFrom3(&actions)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t()
        sigfillset(&all)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
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
