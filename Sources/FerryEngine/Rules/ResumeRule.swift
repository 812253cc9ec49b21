import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The rules for a download's response, given the range it asked for: `bytes=N-` (a single stream resuming
/// at N, or from 0 with no Range at all) or `bytes=N-M` (one range of a segmented download).
/// Pure: the attempt applies the verdict to its file. A bounded range cannot start over or be discarded
/// alone: the attempt turns those verdicts into `AttemptOutcome.unusable`.
public enum ResumeRule {
    public enum Verdict: Equatable, Sendable {
        /// Write the body after the first `offset` bytes already on disk.
        case append(offset: Int64, total: Int64?)
        /// The body is the whole representation: truncate, then write from zero.
        case startOver(total: Int64?)
        /// Nothing left to fetch: what is on disk is the whole file (416 for a range at the end).
        case alreadyComplete
        /// The answer cannot be used; drop what is on disk and ask again for the whole file.
        case discardAndRestart(reason: String)
        /// The server refused: the status decides whether to retry.
        case failure(TransferFailure)
    }

    /// `Content-Range: bytes START-END/TOTAL` (TOTAL may be `*`), or `bytes */TOTAL` for 416.
    public struct ContentRange: Equatable, Sendable {
        public var start: Int64?
        public var end: Int64?
        public var total: Int64?

        public init?(_ header: String) {
            let value = String(HTTPText.trimmed(header))
            guard value.lowercased().hasPrefix("bytes") else { return nil }
            let rest = String(HTTPText.trimmed(value.dropFirst(5)))
            let halves = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard halves.count == 2 else { return nil }
            let totalText = HTTPText.trimmed(halves[1])
            if totalText == "*" {
                total = nil
            } else {
                guard let t = Int64(totalText), t >= 0 else { return nil }
                total = t
            }
            let range = HTTPText.trimmed(halves[0])
            if range == "*" {
                start = nil
                end = nil
            } else {
                let ends = range.split(separator: "-", omittingEmptySubsequences: false)
                guard ends.count == 2, ends.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
                      let s = Int64(ends[0]), let e = Int64(ends[1]), e >= s else { return nil }
                if let total, e >= total { return nil }
                start = s
                end = e
            }
        }
    }

    /// - Parameters:
    ///   - status: the final (non-1xx) status code.
    ///   - header: a case-insensitive header lookup.
    ///   - requestedOffset: the N of `Range: bytes=N-`, or 0 when no range was asked.
    ///   - requestedEnd: one past M of `Range: bytes=N-M`; nil for an open-ended range.
    ///   - knownTotal: the size the earlier attempts were told, if any.
    ///   - now: for Retry-After dates.
    public static func evaluate(
        status: Int, header: (String) -> String?, requestedOffset: Int64, requestedEnd: Int64? = nil, knownTotal: Int64?,
        now: Date
    ) -> Verdict {
        guard (200..<300).contains(status) else {
            let retryAfter = header("Retry-After").flatMap { RetryAfter.delay($0, now: now) }
            if status == 416, requestedOffset > 0, requestedEnd == nil {
                let total = header("Content-Range").flatMap(ContentRange.init)?.total ?? knownTotal
                if total == requestedOffset { return .alreadyComplete }
                return .discardAndRestart(reason: "the server refused the range from byte \(requestedOffset)")
            }
            return .failure(.http(status: status, reason: reasonPhrase(status), retryAfter: retryAfter))
        }
        let length = header("Content-Length").flatMap { Int64(HTTPText.trimmed($0)) }
        if status == 206 {
            guard let range = header("Content-Range").flatMap(ContentRange.init), let start = range.start else {
                return .discardAndRestart(reason: "206 without a usable Content-Range")
            }
            guard start == requestedOffset else {
                return .discardAndRestart(reason: "asked for byte \(requestedOffset), the server sent from byte \(start)")
            }
            if let requestedEnd, range.end != requestedEnd - 1 {
                return .discardAndRestart(reason: "the server answered another range than bytes \(requestedOffset)-\(requestedEnd - 1)")
            }
            if let knownTotal, range.total != knownTotal {
                return .discardAndRestart(reason: "the file's size changed on the server")
            }
            if let end = range.end, let length, length != end - start + 1 {
                return .discardAndRestart(reason: "Content-Length disagrees with Content-Range")
            }
            return .append(offset: start, total: range.total)
        }
        // Any other 2xx carries the whole representation (a server may ignore Range, or the validator changed).
        return .startOver(total: length)
    }

    public static func reasonPhrase(_ status: Int) -> String {
        let phrase = HTTPURLResponse.localizedString(forStatusCode: status)
        return phrase.split(separator: " ").map { word in
            word.prefix(1).uppercased() + word.dropFirst()
        }.joined(separator: " ")
    }
}
