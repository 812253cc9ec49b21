import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How one attempt (one URLSession task) ended: one vocabulary for a download's ranges and for uploads.
enum AttemptOutcome: Sendable {
    /// It succeeded. An open-ended download range hands over its file for the last steps (size, checksum,
    /// fsync, rename); a bounded range and an upload hand over nothing.
    case finished(FileHandover?)
    case failed(TransferFailure, progressed: Bool)
    /// A bounded range the server would not serve exactly (a 200, another range or size): the ranges cannot
    /// be trusted, and the download goes on as one stream from zero.
    case unusable(String)
    /// Stopped by `cancel()`: the transfer knows why (pause, cancel, shutdown, split).
    case stopped
}

/// What an attempt reports when it ends: how, and what it learned on the way.
struct AttemptReport: Sendable {
    var outcome: AttemptOutcome
    /// Bytes of the attempt's range on disk, counted from the range's start (a single stream's range
    /// starts at 0, so this is the `.part` file's length); an upload's bytes sent.
    var bytesDone: Int64 = 0
    /// A single stream's or an upload's size, once known.
    var bytesExpected: Int64?
    var fileName: String?
    var validators = Validators()
    var status: Int?
    /// Over SSH: the host key the connection was checked with (TransferScheme.hostKeyHeader).
    var hostKey: String?
    /// Uploads: the server's answer, kept for the detail view.
    var response: ServerResponse?
}

/// An open `.part` file passed from the attempt to the finishing step.
struct FileHandover: @unchecked Sendable {
    // The attempt gives up the file before handing it over; only the finisher touches it afterwards.
    let file: PartialFile
    let fileName: String
    let total: Int64?
}

/// What the delegate routes a task's callbacks to, and what snapshots read while it runs. Each attempt is
/// a fresh object; it reports once, through the closure it was made with, when its task completes.
protocol TaskRun: AnyObject, Sendable {
    func didReceive(response: URLResponse, task: URLSessionTask)
    func didReceive(data: Data)
    func didComplete(error: Error?)
    /// Bytes of the range done so far (on disk or buffered), counted from the range's start; an upload's bytes sent.
    var bytesDone: Int64 { get }
    /// Of those, the bytes on disk.
    var flushedBytes: Int64 { get }
    var bytesExpected: Int64? { get }
    /// Uploads: a fresh body for this attempt; nil when it cannot be made.
    func makeBody() -> TransportBody?
    /// Uploads: bytes of the body handed to the connection since the last call.
    func didSend(bytes: Int64)
    /// Downloads: write buffered bytes to disk now.
    func flushToDisk()
    /// An interim (1xx) response before the final one (`104 Upload Resumption Supported`).
    func didReceive(informational response: HTTPURLResponse)
}

extension TaskRun {
    func makeBody() -> TransportBody? { nil }
    func didSend(bytes: Int64) {}
    func flushToDisk() {}
    func didReceive(informational response: HTTPURLResponse) {}
    var flushedBytes: Int64 { bytesDone }
}

extension TransferFailure {
    /// What a task's completion error means for the attempt: nil for a cancel (the engine stopped it).
    static func from(taskError error: Error) -> TransferFailure? {
        let ns = error as NSError
        if ns.domain == NSURLErrorDomain, ns.code == NSURLErrorCancelled { return nil }
        // The kind as the transport said it; else (corelibs' own errors) as the code stands for. -1 is what a
        // mid-body close looks like on Linux ("transfer closed with N bytes remaining").
        let kind = (ns.userInfo[FailureKind.userInfoKey] as? String).flatMap(FailureKind.init(rawValue:))
            ?? FailureKind(urlErrorCode: ns.code)
        return .transport(code: ns.code, kind: kind, message: TerminalSafe.sanitize(ns.localizedDescription))
    }
}

extension TransferFailure {
    /// The transport moved a download off an HTTP/2 stream for its bandwidth limit (CurlTransfer.endedForLimit):
    /// not a failure, it goes on at once.
    var movedForLimit: Bool {
        if case let .transport(code, _, _) = self { return code == TransportCodes.movedForLimit }
        return false
    }
}
