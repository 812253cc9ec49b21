import FerryModel
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a resumable upload does once one of its requests has ended: a pure rule, as ResumeRule is for a
/// download's answer. ResumableUploadRun issues the requests (its `Step`s) and applies the `Decision` this gives:
/// what to keep of the server's answer, and the next request or the attempt's end.
enum ResumableSteps {
    /// One request of the sequence.
    enum Step: Equatable, Sendable {
        /// The upload itself, offering the IETF protocol.
        case create
        /// The first `count` bytes, making the upload with the IETF protocol and saying more follows
        /// (`Upload-Complete: ?0`): only to a host seen to speak the draft.
        case createChunk(count: Int64)
        /// tus: the creation request.
        case tusCreate
        /// The server's offset (HEAD on the location).
        case query
        /// `count` bytes from `from`, one chunk (PATCH on the location).
        case append(from: Int64, count: Int64)
        /// The upload without the protocol's headers: the server speaks another version of the draft.
        case plain

        /// It makes the server's copy (from the file as it is then).
        var creates: Bool {
            switch self {
            case .create, .createChunk, .tusCreate: true
            case .query, .append, .plain: false
            }
        }

        /// It makes the server's copy with the IETF draft's headers: a 104 to it says where the copy is kept.
        var offersDraft: Bool {
            switch self {
            case .create, .createChunk: true
            case .tusCreate, .query, .append, .plain: false
            }
        }
    }

    /// What the run knows beside the answer.
    struct Facts {
        var kind: ResumableProtocol
        /// The file's length (the whole upload).
        var length: Int64
        /// The server said where it keeps the upload (a 104 to the creation, or tus's Location).
        var located: Bool
        /// Where, for messages.
        var locationName: String
        /// The item's URL (a relative Location is resolved against it).
        var url: URL
        /// An append the server answered with success without moving its offset, sent from there (read once).
        var stalledAt: Int64?
        /// 409s answered so far in this attempt.
        var conflicts: Int
        /// The chunk under way is larger than the start size (a refusal of it sends the start size again).
        var grownChunk: Bool
        /// The file changed while it was sent (its body stream said so).
        var fileChanged: Bool
        /// Bytes went out in this attempt.
        var progressed: Bool
    }

    /// After a request: what follows.
    enum Next {
        case request(Step)
        /// The next chunk from this offset (its size is the run's chunking's).
        case append(from: Int64)
        /// The server's copy is gone or unusable: from zero (once per attempt), for this reason.
        case startOver(String)
        case end(AttemptOutcome)
    }

    /// What the run keeps of the answer, then `next`.
    struct Decision {
        /// The chunk was larger than the server takes: the start size from now on (and the engine told).
        var refusedGrownChunk = false
        /// The file changed while it was sent: the server's copy cannot be finished; a retry starts over, and
        /// this is why.
        var freshUploadReason: String?
        /// A whole append of this many bytes was answered with success: its timing decides the next chunk.
        var measuredChunk: Int64?
        /// One more 409 in this attempt.
        var conflict = false
        /// tus: where the server keeps the upload (at offset 0).
        var location: String?
        /// The server confirmed this offset.
        var confirmed: Int64?
        /// An append taken with success and none of it kept: sent from here; the query that follows checks it.
        var stalledAt: Int64?
        var next: Next

        init(_ next: Next) { self.next = next }
    }

    static let maxConflicts = 3

    /// The request `step` ended with `answer` (and the task's `error`, if it failed).
    static func after(_ step: Step, answer: UploadAnswer, error: Error?, facts: Facts) -> Decision {
        let progressed = facts.progressed
        // A chunk grown past what the server takes: the start size again (nothing of it was kept). The answer
        // may come while the chunk is sent, and the server close the connection on it (PyPI's resumable-upload):
        // the request then ends with an error too.
        if case let .append(from, _) = step, answer.status == 413, facts.grownChunk {
            var decision = Decision(.append(from: from))
            decision.refusedGrownChunk = true
            return decision
        }
        // A grown chunk cut before any answer came: the server may have refused it and reset the connection with
        // the body unread, which drops its answer on the way (PyPI's resumable-upload behind a proxy; libcurl then
        // fails to send the request again). Taken as a refusal: the start size from now on, the server asked
        // where the upload stands; a cut of the link fails that question, and the attempt ends as a cut does.
        if case .append = step, let error, (error as? URLError)?.code != .cancelled, answer.status == nil, facts.grownChunk {
            var decision = Decision(.request(.query))
            decision.refusedGrownChunk = true
            return decision
        }
        guard error == nil, let status = answer.status else {
            // Cut, stopped or unanswered: the next attempt asks the server where it stands; unless the file
            // changed while it was sent (its body failed so), whose copy on the server cannot be finished: the
            // next attempt (`ferry retry`) starts over with the file as it is then.
            let outcome = answer.outcome(error: error, progressed: progressed)
            var decision = Decision(.end(outcome))
            if facts.fileChanged, case let .failed(failure, _) = outcome {
                decision.freshUploadReason = TerminalSafe.sanitize(failure.message)
            }
            return decision
        }
        let wire = ResumableWire(kind: facts.kind)
        switch step {
        case .create:
            if status == 400, let version = answer.value("Upload-Draft-Interop-Version"),
               version.trimmingCharacters(in: .whitespaces) != String(ResumableProtocol.ietfInteropVersion) {
                // A server of another version of the draft refused ours (swift-nio-extras answers an unknown
                // version so): the upload goes again without the protocol, as it would to any other server.
                return Decision(.request(.plain))
            }
            // A server that took the protocol (it said where it keeps the upload) says how much of it arrived,
            // as it does for an append; one that did not answers a plain upload.
            guard facts.located, (200..<300).contains(status) else {
                return Decision(.end(answer.outcome(error: nil, progressed: progressed)))
            }
            return sent(from: 0, count: facts.length, answer, wire, facts)
        case let .createChunk(count):
            guard (200..<300).contains(status) else { return Decision(.end(answer.outcome(error: nil, progressed: progressed))) }
            // Where the server keeps the upload: its 104, else the answer's Location with the draft's words beside it.
            var location: String?
            if !facts.located {
                guard let value = answer.value("Location"), let url = ResumableWire.resolve(value, against: facts.url),
                      wire.completeness(answer) == false || answer.value("Upload-Offset") != nil else {
                    // The host no longer speaks the draft, and may have taken the chunk as the whole file: the whole
                    // upload goes again, offering the protocol as to any server.
                    return Decision(.request(.create))
                }
                location = url.absoluteString
            }
            var decision = sent(from: 0, count: count, answer, wire, facts)
            decision.location = location
            return decision
        case .plain:
            return Decision(.end(answer.outcome(error: nil, progressed: progressed)))
        case .tusCreate:
            guard (200..<300).contains(status) else { return Decision(.end(answer.outcome(error: nil, progressed: false))) }
            guard let value = answer.value("Location"), let url = ResumableWire.resolve(value, against: facts.url) else {
                return Decision(.end(.failed(.protocolViolation("\(TerminalSafe.sanitize(facts.url.absoluteString)) does not speak tus: "
                    + "its answer (HTTP \(status)) to the creation request says nowhere to send the bytes (no Location)"), progressed: false)))
            }
            // An empty file is whole once made (a PATCH of nothing is one that some servers refuse).
            var decision = Decision(facts.length == 0 ? .end(.finished(nil)) : .append(from: 0))
            decision.location = url.absoluteString
            return decision
        case .query:
            if wire.forgotten(status) {
                return Decision(.startOver("the server no longer has the upload at \(facts.locationName) (HTTP \(status))"))
            }
            guard (200..<300).contains(status) else { return Decision(.end(answer.outcome(error: nil, progressed: progressed))) }
            guard let offset = answer.value("Upload-Offset").flatMap(ResumableWire.integer) else {
                return Decision(.end(.failed(.protocolViolation("the server's answer about the upload has no Upload-Offset"), progressed: false)))
            }
            if let length = answer.value("Upload-Length").flatMap(ResumableWire.integer), length != facts.length {
                return Decision(.startOver("the server's upload is \(length) bytes long, the file \(facts.length)"))
            }
            guard offset <= facts.length else {
                return Decision(.startOver("the server holds \(offset) bytes of a \(facts.length)-byte file"))
            }
            if let stalled = facts.stalledAt, offset <= stalled {
                return Decision(.end(.failed(.integrity(.protocol, "the server at \(facts.locationName) kept none of the "
                    + "\(facts.length - stalled) bytes sent to it: it answered with success and its offset stayed at \(offset)"),
                    progressed: false)))
            }
            // Everything arrived before the cut (the server's last answer to it was lost), or the rest goes.
            let whole = offset == facts.length && (facts.kind == .tus || wire.completeness(answer) == true)
            var decision = Decision(whole ? .end(.finished(nil)) : .append(from: offset))
            decision.confirmed = offset
            return decision
        case let .append(from, count):
            if wire.forgotten(status) {
                return Decision(.startOver("the server no longer has the upload at \(facts.locationName) (HTTP \(status))"))
            }
            if status == 409 {
                // The server's offset is not ours: ask again (a few times, then let the retry policy wait).
                var decision = Decision(facts.conflicts + 1 <= maxConflicts ? .request(.query)
                    : .end(.failed(.http(status: 409, reason: "Conflict: the server's offset kept moving", retryAfter: nil), progressed: progressed)))
                decision.conflict = true
                return decision
            }
            guard (200..<300).contains(status) else { return Decision(.end(answer.outcome(error: nil, progressed: progressed))) }
            var decision = sent(from: from, count: count, answer, wire, facts)
            decision.measuredChunk = count
            return decision
        }
    }

    /// A request that carried `count` bytes from `from` was answered with success: where the server says it
    /// stands decides what follows. Its Upload-Offset (tus always sends one), else for the IETF protocol the
    /// whole file after the last chunk unless it says the upload is incomplete; after another chunk, a server
    /// that says nothing is asked.
    private static func sent(from: Int64, count: Int64, _ answer: UploadAnswer, _ wire: ResumableWire, _ facts: Facts) -> Decision {
        let incomplete = wire.completeness(answer) == false
        let said = answer.value("Upload-Offset").flatMap(ResumableWire.integer)
        if said == nil, wire.kind == .ietf, !incomplete, from + count < facts.length { return Decision(.request(.query)) }
        let offset = said ?? (wire.kind == .tus || incomplete ? from : facts.length)
        guard offset <= facts.length else {
            return Decision(.startOver("the server says it holds \(offset) bytes of a \(facts.length)-byte file"))
        }
        if offset == facts.length, !incomplete {
            var decision = Decision(.end(.finished(nil)))
            decision.confirmed = offset
            return decision
        }
        // A server may take part of it: the rest goes from its offset. One that took none of it is asked where
        // it stands, once.
        if offset > from {
            var decision = Decision(.append(from: offset))
            decision.confirmed = offset
            return decision
        }
        var decision = Decision(.request(.query))
        decision.stalledAt = from
        return decision
    }
}
