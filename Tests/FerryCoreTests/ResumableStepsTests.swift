import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@testable import FerryEngine
@testable import FerryModel

/// Issue 40: a resumable upload's step machine as a pure rule (ResumableSteps), each of its turns checked
/// without a server: what follows each request, and what is kept of its answer.
@Suite struct ResumableStepsTests {
    static let url = URL(string: "http://example.test/files")!
    static let mib: Int64 = 1 << 20

    func answer(_ status: Int, _ headers: [String: String] = [:]) -> UploadAnswer {
        var answer = UploadAnswer()
        answer.begin(HTTPURLResponse(url: Self.url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!, now: Date())
        return answer
    }

    func facts(_ kind: ResumableProtocol = .tus, length: Int64 = 10 << 20, located: Bool = true, stalledAt: Int64? = nil,
               conflicts: Int = 0, grown: Bool = false, fileChanged: Bool = false) -> ResumableSteps.Facts {
        ResumableSteps.Facts(kind: kind, length: length, located: located, locationName: "http://example.test/files/1",
                             url: Self.url, stalledAt: stalledAt, conflicts: conflicts, grownChunk: grown,
                             fileChanged: fileChanged, progressed: true)
    }

    /// The next step, in words a test can compare.
    func next(_ decision: ResumableSteps.Decision) -> String {
        switch decision.next {
        case let .request(step): "request \(step)"
        case let .append(from): "append from \(from)"
        case let .startOver(reason): "start over: \(reason)"
        case let .end(.failed(failure, _)): "fail: \(failure.message)"
        case .end(.finished): "finished"
        case .end(.stopped): "stopped"
        case let .end(.unusable(reason)): "unusable: \(reason)"
        }
    }

    /// Issue 41: to a host seen to speak the IETF draft, the creation carries the first chunk (Upload-Complete: ?0);
    /// its answer says where the upload is kept and how much of it arrived.
    @Test func aChunkedCreationGoesOnFromWhatTheServerSaysItHolds() {
        let create = ResumableSteps.Step.createChunk(count: 6 * Self.mib)
        #expect(create.creates && create.offersDraft && !ResumableSteps.Step.tusCreate.offersDraft)
        // No 104 came: the Location of the answer, with the draft's words beside it.
        let made = ResumableSteps.after(create, answer: answer(201, ["Location": "/files/7", "Upload-Complete": "?0",
                                                                      "Upload-Offset": String(6 * Self.mib)]),
                                        error: nil, facts: facts(.ietf, located: false))
        #expect(next(made) == "append from \(6 * Self.mib)" && made.confirmed == 6 * Self.mib)
        #expect(made.location == "http://example.test/files/7")
        // Its 104 said where: the offset it holds decides, as after an append.
        let located = ResumableSteps.after(create, answer: answer(201, ["Upload-Complete": "?0", "Upload-Offset": String(2 * Self.mib)]),
                                           error: nil, facts: facts(.ietf, located: true))
        #expect(next(located) == "append from \(2 * Self.mib)" && located.location == nil)
        // An answer without the draft's words (a server that no longer speaks it may keep the chunk as the file):
        // the whole upload goes again as a creation that offers the protocol.
        let plain = ResumableSteps.after(create, answer: answer(201, ["Location": "/files/7"]), error: nil, facts: facts(.ietf, located: false))
        #expect(next(plain) == "request create" && plain.location == nil)
        // Refused: the attempt ends on the answer; cut: as any cut request.
        #expect(next(ResumableSteps.after(create, answer: answer(503), error: nil, facts: facts(.ietf, located: false))).hasPrefix("fail: HTTP 503"))
        #expect(next(ResumableSteps.after(create, answer: UploadAnswer(), error: URLError(.networkConnectionLost),
                                          facts: facts(.ietf, located: true))).hasPrefix("fail:"))
    }

    @Test func aGrownChunkRefusedOrCutUnansweredGoesBackToTheStartSize() {
        let append = ResumableSteps.Step.append(from: 6 * Self.mib, count: 40 * Self.mib)
        let refused = ResumableSteps.after(append, answer: answer(413), error: nil, facts: facts(grown: true))
        #expect(refused.refusedGrownChunk && next(refused) == "append from \(6 * Self.mib)")
        // The same 413 to the start size is the server's answer: the attempt fails on it.
        let atStart = ResumableSteps.after(append, answer: answer(413), error: nil, facts: facts(grown: false))
        #expect(!atStart.refusedGrownChunk && next(atStart).hasPrefix("fail: HTTP 413"))
        // A 413 that came while the body went, the connection then closed: an error beside the answer.
        let withError = ResumableSteps.after(append, answer: answer(413), error: URLError(.networkConnectionLost), facts: facts(grown: true))
        #expect(withError.refusedGrownChunk && next(withError) == "append from \(6 * Self.mib)")
        // Cut with no answer at all: taken as a refusal, the server asked where it stands.
        let cut = ResumableSteps.after(append, answer: UploadAnswer(), error: URLError(.networkConnectionLost), facts: facts(grown: true))
        #expect(cut.refusedGrownChunk && next(cut) == "request query")
        // A stop is not a refusal.
        let stopped = ResumableSteps.after(append, answer: UploadAnswer(), error: URLError(.cancelled), facts: facts(grown: true))
        #expect(!stopped.refusedGrownChunk && next(stopped) == "stopped")
        // A chunk of the start size cut: the attempt ends as a cut does.
        let plainCut = ResumableSteps.after(append, answer: UploadAnswer(), error: URLError(.networkConnectionLost), facts: facts(grown: false))
        #expect(!plainCut.refusedGrownChunk && next(plainCut).hasPrefix("fail:"))
    }

    @Test func aFileChangedWhileSentDropsTheServersCopy() {
        let cut = ResumableSteps.after(.append(from: 0, count: Self.mib), answer: UploadAnswer(),
                                       error: URLError(.networkConnectionLost), facts: facts(fileChanged: true))
        #expect(cut.freshUploadReason != nil && next(cut).hasPrefix("fail:"))
        let unchanged = ResumableSteps.after(.append(from: 0, count: Self.mib), answer: UploadAnswer(),
                                             error: URLError(.networkConnectionLost), facts: facts())
        #expect(unchanged.freshUploadReason == nil)
    }

    @Test func anIETFCreationEndsWholeGoesPlainOrIsAnsweredAsAPlainUpload() {
        let length: Int64 = 10 << 20
        let otherVersion = ResumableSteps.after(.create, answer: answer(400, ["Upload-Draft-Interop-Version": "3"]), error: nil,
                                                facts: facts(.ietf))
        #expect(next(otherVersion) == "request plain")
        let whole = ResumableSteps.after(.create, answer: answer(201), error: nil, facts: facts(.ietf, length: length))
        #expect(next(whole) == "finished" && whole.confirmed == length)
        let incomplete = ResumableSteps.after(.create, answer: answer(201, ["Upload-Complete": "?0", "Upload-Offset": "4096"]), error: nil,
                                              facts: facts(.ietf, length: length))
        #expect(next(incomplete) == "append from 4096" && incomplete.confirmed == 4096)
        // No 104 came: a plain upload's answer, whatever it is.
        let plain = ResumableSteps.after(.create, answer: answer(201), error: nil, facts: facts(.ietf, located: false))
        #expect(next(plain) == "finished" && plain.confirmed == nil)
        #expect(next(ResumableSteps.after(.plain, answer: answer(500), error: nil, facts: facts(.ietf))).hasPrefix("fail: HTTP 500"))
    }

    @Test func aTusCreationSaysWhereTheUploadIs() {
        let made = ResumableSteps.after(.tusCreate, answer: answer(201, ["Location": "/files/7"]), error: nil, facts: facts(located: false))
        #expect(made.location == "http://example.test/files/7" && next(made) == "append from 0")
        let empty = ResumableSteps.after(.tusCreate, answer: answer(201, ["Location": "/files/8"]), error: nil,
                                         facts: facts(length: 0, located: false))
        #expect(empty.location != nil && next(empty) == "finished")
        let nowhere = ResumableSteps.after(.tusCreate, answer: answer(201), error: nil, facts: facts(located: false))
        #expect(nowhere.location == nil && next(nowhere).contains("does not speak tus"))
        #expect(next(ResumableSteps.after(.tusCreate, answer: answer(403), error: nil, facts: facts(located: false))).hasPrefix("fail: HTTP 403"))
    }

    @Test func aQueryGoesOnFromTheServersOffsetOrStartsOver() {
        let length: Int64 = 10 << 20
        func query(_ status: Int, _ headers: [String: String], kind: ResumableProtocol = .tus, stalledAt: Int64? = nil) -> ResumableSteps.Decision {
            ResumableSteps.after(.query, answer: answer(status, headers), error: nil, facts: facts(kind, length: length, stalledAt: stalledAt))
        }
        let resume = query(200, ["Upload-Offset": "3000", "Upload-Length": "\(length)"])
        #expect(next(resume) == "append from 3000" && resume.confirmed == 3000)
        #expect(next(query(404, [:])).hasPrefix("start over: the server no longer has the upload"))
        #expect(next(query(403, [:])).hasPrefix("start over:"), "tus: 403 is a forgotten upload")
        #expect(next(query(403, [:], kind: .ietf)).hasPrefix("fail: HTTP 403"))
        #expect(next(query(200, [:])) == "fail: the server's answer about the upload has no Upload-Offset")
        #expect(next(query(200, ["Upload-Offset": "0", "Upload-Length": "5"])).hasPrefix("start over: the server's upload is 5 bytes long"))
        #expect(next(query(200, ["Upload-Offset": "\(length + 1)"])).hasPrefix("start over: the server holds"))
        #expect(next(query(200, ["Upload-Offset": "3000"], stalledAt: 3000)).contains("kept none of the"))
        let done = query(200, ["Upload-Offset": "\(length)"])
        #expect(next(done) == "finished" && done.confirmed == length, "tus: the offset at the length is the end")
        // IETF: the offset at the length is the end only where the server says the upload is complete.
        #expect(next(query(204, ["Upload-Offset": "\(length)", "Upload-Complete": "?1"], kind: .ietf)) == "finished")
        #expect(next(query(204, ["Upload-Offset": "\(length)", "Upload-Complete": "?0"], kind: .ietf)) == "append from \(length)")
    }

    @Test func anAppendsAnswerDecidesTheNextChunk() {
        let length: Int64 = 10 << 20
        let append = ResumableSteps.Step.append(from: 2 * Self.mib, count: 2 * Self.mib)
        func after(_ status: Int, _ headers: [String: String], kind: ResumableProtocol = .tus, conflicts: Int = 0) -> ResumableSteps.Decision {
            ResumableSteps.after(append, answer: answer(status, headers), error: nil, facts: facts(kind, length: length, conflicts: conflicts))
        }
        let taken = after(204, ["Upload-Offset": "\(4 * Self.mib)"])
        #expect(next(taken) == "append from \(4 * Self.mib)" && taken.confirmed == 4 * Self.mib && taken.measuredChunk == 2 * Self.mib)
        let part = after(204, ["Upload-Offset": "\(3 * Self.mib)"])
        #expect(next(part) == "append from \(3 * Self.mib)", "a server that took part of it: the rest from its offset")
        let none = after(204, ["Upload-Offset": "\(2 * Self.mib)"])
        #expect(next(none) == "request query" && none.stalledAt == 2 * Self.mib && none.confirmed == nil)
        #expect(next(after(204, ["Upload-Offset": "\(length + 1)"])).hasPrefix("start over: the server says it holds"))
        #expect(next(after(410, [:])).hasPrefix("start over:"))
        let conflict = after(409, [:])
        #expect(conflict.conflict && next(conflict) == "request query")
        let again = after(409, [:], conflicts: ResumableSteps.maxConflicts)
        #expect(again.conflict && next(again) == "fail: HTTP 409 Conflict: the server's offset kept moving")
        // IETF: an append answered without an offset is asked about, unless it was the last.
        #expect(next(after(204, [:], kind: .ietf)) == "request query")
        let last = ResumableSteps.after(.append(from: 8 * Self.mib, count: 2 * Self.mib), answer: answer(201), error: nil,
                                        facts: facts(.ietf, length: length))
        #expect(next(last) == "finished" && last.confirmed == length)
        let incomplete = ResumableSteps.after(.append(from: 8 * Self.mib, count: 2 * Self.mib), answer: answer(204, ["Upload-Complete": "?0"]),
                                              error: nil, facts: facts(.ietf, length: length))
        #expect(next(incomplete) == "request query" && incomplete.stalledAt == 8 * Self.mib)
    }
}
