import FerryCore
import Foundation
import Synchronization

/// A child process for the tests, started with posix_spawn (FerryCore's Spawn, as the engine and the hooks): what the tests used Foundation's `Process` for, with
/// the same behaviour (a process group of its own; standard input, output and error from a `Pipe`, a
/// `FileHandle`, or /dev/null when not set; every other descriptor closed; signal dispositions and mask
/// inherited, so a child of the test process ignores SIGPIPE as the test process does).
///
/// Why not `Process`: corelibs' `Process.run` (Swift 6.3.1) finds the descriptors to close by copying each
/// /proc/self/fd entry's 256-byte name field, reading past glibc's directory buffer when it is full (the test
/// process has 1,200-1,600 descriptors open while the suites run in parallel); when that buffer ends a mapping
/// the test process dies with SIGSEGV (swift-corelibs-foundation PR #5472). It did, about one full run in ten.
/// `posix_spawn_file_actions_addclosefrom_np` closes the rest in the child without reading the directory.
public final class ChildProcess: @unchecked Sendable {
    public enum TerminationReason: Sendable { case exit, uncaughtSignal }

    public var executableURL: URL?
    public var arguments: [String] = []
    /// nil: the test process's own environment.
    public var environment: [String: String]?
    public var currentDirectoryURL: URL?
    /// A `Pipe`, a `FileHandle`, or nil (/dev/null).
    public var standardInput: Any?
    public var standardOutput: Any?
    public var standardError: Any?
    /// Called on a thread of its own once the child has exited.
    public var terminationHandler: (@Sendable (ChildProcess) -> Void)?

    private struct Exit { var status: Int32 = 0; var reason: TerminationReason = .exit; var done = false }
    private let state = Mutex(Exit())
    private let exitCondition = NSCondition()
    public private(set) var processIdentifier: pid_t = 0

    public init() {}

    public var isRunning: Bool { processIdentifier > 0 && !state.withLock { $0.done } }
    public var terminationStatus: Int32 { state.withLock { precondition($0.done, "still running"); return $0.status } }
    public var terminationReason: TerminationReason { state.withLock { precondition($0.done, "still running"); return $0.reason } }

    public func terminate() { if processIdentifier > 0 { kill(processIdentifier, SIGTERM) } }
    public func interrupt() { if processIdentifier > 0 { kill(processIdentifier, SIGINT) } }

    public func waitUntilExit() {
        exitCondition.lock()
        while !state.withLock({ $0.done }) { exitCondition.wait() }
        exitCondition.unlock()
    }

    public func run() throws {
        guard let path = executableURL?.path else { throw POSIXError(.ENOENT) }
        // The parent's copies of the child's ends, closed once it runs (so that a reader sees the end of a pipe).
        var childEnds: [FileHandle] = []
        var streams: [Spawn.Stream] = []
        for (value, reads) in [(standardInput, true), (standardOutput, false), (standardError, false)] {
            switch value {
            case let pipe as Pipe:
                let end = reads ? pipe.fileHandleForReading : pipe.fileHandleForWriting
                streams.append(.descriptor(end.fileDescriptor))
                childEnds.append(end)
            // FileHandle.nullDevice has no descriptor (-1).
            case let handle as FileHandle where handle.fileDescriptor >= 0: streams.append(.descriptor(handle.fileDescriptor))
            default: streams.append(.devNull)
            }
        }
        let pid = try ProcessEnvironment.lock.withLock { () throws -> pid_t in
            do throws(Spawn.Failure) {
                return try Spawn.start([path] + arguments, program: path, environment: environment, streams: streams,
                                       directory: currentDirectoryURL?.path, defaultSignals: false)
            } catch {
                throw POSIXError(POSIXErrorCode(rawValue: error.code) ?? .EINVAL)
            }
        }
        processIdentifier = pid
        for end in childEnds { try? end.close() }
        let child = pid
        Thread.detachNewThread { [self] in
            var status: Int32 = 0
            while waitpid(child, &status, 0) == -1 && errno == EINTR {}
            let signal = status & 0x7f
            state.withLock {
                if signal != 0 { $0.status = signal; $0.reason = .uncaughtSignal } else { $0.status = (status >> 8) & 0xff }
                $0.done = true
            }
            exitCondition.lock(); exitCondition.broadcast(); exitCondition.unlock()
            terminationHandler?(self)
        }
    }
}
