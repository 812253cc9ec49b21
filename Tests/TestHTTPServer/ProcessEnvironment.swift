import Foundation

/// The tests of every target run in one process. A test that changes the process's environment (setenv, or
/// CursesTerminal's unsetenv of LINES and COLUMNS) while another starts a child (ChildProcess.run passes the
/// environment on) would race it: both hold this lock.
public enum ProcessEnvironment {
    public static let lock = NSLock()
}
