import Foundation

/// The tests of every target run in one process. A test that changes the process's environment (setenv, or
/// CursesTerminal's unsetenv of LINES and COLUMNS) while another starts a child (Foundation's Process.run
/// reads the environment) would race it: both hold this lock.
///
/// (The "memmove past a freed page in Process.run" that crashes the test process now and then, 2 full runs in
/// about 20 here, is not that race: Foundation's `findMaximumOpenFromProcSelfFD` copies 256 bytes of each
/// dirent past the end of glibc's directory buffer, swift-corelibs-foundation PR #5472, not in Swift 6.3.1.
/// Setting malloc's mmap threshold does not move that buffer out of the heap. ferry itself never uses Process:
/// it spawns with posix_spawn. The way out is the tests' own posix_spawn, or a Swift with the fix.)
public enum ProcessEnvironment {
    public static let lock = NSLock()

    /// Starts `process` with the environment left alone meanwhile.
    public static func run(_ process: Process) throws {
        try lock.withLock { try process.run() }
    }
}
