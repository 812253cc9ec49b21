import Foundation
import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport

@Suite struct ResumeRuleTests {
    func evaluate(_ status: Int, _ headers: [String: String], offset: Int64, end: Int64? = nil, known: Int64? = nil) -> ResumeRule.Verdict {
        ResumeRule.evaluate(status: status, header: { name in
            headers.first { $0.key.lowercased() == name.lowercased() }?.value
        }, requestedOffset: offset, requestedEnd: end, knownTotal: known, now: Date(timeIntervalSince1970: 0))
    }

    // A bounded range (one segment, `bytes=1000-1999` of 4000): only exactly that range of a file of that size.

    @Test func aBoundedRangeTakesExactlyItsRange() {
        let exact = evaluate(206, ["Content-Range": "bytes 1000-1999/4000", "Content-Length": "1000"], offset: 1000, end: 2000, known: 4000)
        #expect(exact == .append(offset: 1000, total: 4000))
    }

    @Test func aWholeFileAnswerToABoundedRangeIsNotARange() {
        // RangeRun turns this into AttemptOutcome.unusable: the ranges fall back to one stream.
        #expect(evaluate(200, ["Content-Length": "4000"], offset: 1000, end: 2000, known: 4000) == .startOver(total: 4000))
    }

    @Test func anotherRangeOrSizeIsRefused() {
        let longer = evaluate(206, ["Content-Range": "bytes 1000-3999/4000"], offset: 1000, end: 2000, known: 4000)
        #expect(longer == .discardAndRestart(reason: "the server answered another range than bytes 1000-1999"))
        let resized = evaluate(206, ["Content-Range": "bytes 1000-1999/5000"], offset: 1000, end: 2000, known: 4000)
        #expect(resized == .discardAndRestart(reason: "the file's size changed on the server"))
    }

    @Test func a416ToABoundedRangeIsAFailureNotAFinishedFile() {
        let verdict = evaluate(416, ["Content-Range": "bytes */2000"], offset: 2000, end: 3000, known: 4000)
        #expect(verdict == .failure(.http(status: 416, reason: ResumeRule.reasonPhrase(416), retryAfter: nil)))
    }

    @Test func freshDownloadTakesTheLength() {
        #expect(evaluate(200, ["Content-Length": "100"], offset: 0) == .startOver(total: 100))
        #expect(evaluate(200, [:], offset: 0) == .startOver(total: nil))
    }

    @Test func a206StartingAtTheOffsetWithTheKnownTotalIsAppended() {
        let verdict = evaluate(206, ["Content-Range": "bytes 30-99/100", "Content-Length": "70"], offset: 30, known: 100)
        #expect(verdict == .append(offset: 30, total: 100))
    }

    @Test func a206AtTheWrongOffsetIsDiscarded() {
        guard case .discardAndRestart = evaluate(206, ["Content-Range": "bytes 0-99/100"], offset: 30, known: 100) else {
            Issue.record("a range that does not start at the offset must not be appended")
            return
        }
    }

    @Test func a206WithAnotherTotalIsDiscarded() {
        guard case .discardAndRestart = evaluate(206, ["Content-Range": "bytes 30-199/200"], offset: 30, known: 100) else {
            Issue.record("a changed total means a changed file")
            return
        }
    }

    @Test func a206WithoutContentRangeIsDiscarded() {
        guard case .discardAndRestart = evaluate(206, [:], offset: 30, known: 100) else {
            Issue.record("no Content-Range, no append")
            return
        }
    }

    @Test func a200ToARangedRequestStartsOver() {
        #expect(evaluate(200, ["Content-Length": "120"], offset: 30, known: 100) == .startOver(total: 120))
    }

    @Test func a416AtTheEndMeansComplete() {
        #expect(evaluate(416, ["Content-Range": "bytes */100"], offset: 100, known: 100) == .alreadyComplete)
        #expect(evaluate(416, [:], offset: 100, known: 100) == .alreadyComplete)
    }

    @Test func a416ElsewhereStartsOver() {
        guard case .discardAndRestart = evaluate(416, ["Content-Range": "bytes */50"], offset: 100, known: 100) else {
            Issue.record("a file that shrank must be fetched again")
            return
        }
    }

    @Test func errorsCarryStatusAndRetryAfter() {
        #expect(evaluate(503, ["Retry-After": "7"], offset: 0) == .failure(.http(status: 503, reason: "Service Unavailable", retryAfter: 7)))
        #expect(evaluate(404, [:], offset: 0) == .failure(.http(status: 404, reason: "Not Found", retryAfter: nil)))
    }

    @Test func contentRangeParsing() {
        #expect(ResumeRule.ContentRange("bytes 0-0/1")?.start == 0)
        #expect(ResumeRule.ContentRange("bytes 5-9/*")?.total == nil)
        #expect(ResumeRule.ContentRange("bytes */42")?.total == 42)
        #expect(ResumeRule.ContentRange("bytes 9-5/10") == nil)
        #expect(ResumeRule.ContentRange("bytes 0-10/10") == nil)
        #expect(ResumeRule.ContentRange("items 0-1/2") == nil)
        #expect(ResumeRule.ContentRange("bytes -1-5/10") == nil)
    }

    @Test func ifRangePrefersAStrongETag() {
        #expect(Validators(etag: "\"abc\"", lastModified: "Mon").ifRange == "\"abc\"")
        #expect(Validators(etag: "W/\"abc\"", lastModified: "Mon").ifRange == "Mon")
        #expect(Validators(etag: nil, lastModified: nil).ifRange == nil)
    }
}
