import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How one attempt (one URLSession task) ended, as the manager sees it.
enum RunOutcome: Sendable {
    /// The transfer succeeded. Downloads hand over their file for the final checks and the rename.
    case finished(FileHandover?)
    case failed(TransferFailure, progressed: Bool)
    /// Stopped by `cancel()`: the manager knows why (pause, cancel, shutdown).
    case stopped
}

/// An open `.part` file passed from the attempt to the finishing step.
struct FileHandover: @unchecked Sendable {
    // The attempt gives up the file before handing it over; only the finisher touches it afterwards.
    let file: PartialFile
    let fileName: String
    let total: Int64?
}

/// What the delegate routes a task's callbacks to. Each attempt is a fresh object.
protocol TaskRun: AnyObject, Sendable {
    func didReceive(response: URLResponse, task: URLSessionTask)
    func didReceive(data: Data)
    func didComplete(error: Error?)
    /// Bytes of the file done so far (on disk or buffered), read by snapshots.
    var bytesDone: Int64 { get }
    var bytesExpected: Int64? { get }
    /// Uploads: a fresh body for this attempt; nil when it cannot be made.
    func makeBody() -> TransportBody?
    /// Uploads: bytes of the body handed to the connection since the last call.
    func didSend(bytes: Int64)
    /// Downloads: write buffered bytes to disk now.
    func flushToDisk()
}

extension TaskRun {
    func makeBody() -> TransportBody? { nil }
    func didSend(bytes: Int64) {}
    func flushToDisk() {}
}
