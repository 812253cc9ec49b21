import Foundation

/// The tests of every target run in one process. A test that changes the process's environment (setenv, or
/// CursesTerminal's unsetenv of LINES and COLUMNS) while another starts a child (Foundation's Process.run
/// reads the environment) crashed the run now and then: memmove past a freed page in Process.run. Both hold
/// this lock.
public enum ProcessEnvironment {
    public static let lock = NSLock()

    /// Starts `process` with the environment left alone meanwhile.
    public static func run(_ process: Process) throws {
        try lock.withLock { try process.run() }
    }
}
