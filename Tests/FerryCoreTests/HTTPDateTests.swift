import Foundation
import Testing
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport

@Suite struct HTTPDateTests {
    /// Sun, 06 Nov 1994 08:49:37 GMT
    let reference = Date(timeIntervalSince1970: 784_111_777)
    /// 2025-06-01T00:00:00Z, a fixed "now" for two-digit years.
    let now2025 = Date(timeIntervalSince1970: 1_748_736_000)

    @Test func threeFormats() {
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == reference)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == reference)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == reference)
    }

    @Test func leniency() {
        #expect(HTTPDate.parse("  Sun, 06 Nov 1994 08:49:37 GMT \t") == reference)
        #expect(HTTPDate.parse("sun, 06 nov 1994 08:49:37 gmt") == reference)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 UTC") == reference)
        #expect(HTTPDate.parse("Sun, 6 Nov 1994 08:49:37 GMT") == reference)
        #expect(HTTPDate.parse("Sun Nov 6 08:49:37 1994") == reference)
        #expect(HTTPDate.parse("Sun Nov 06 08:49:37 1994") == reference)
        #expect(HTTPDate.parse("Sunday, 06-Nov-1994 08:49:37 GMT") == reference)
        // the weekday is not checked against the date
        #expect(HTTPDate.parse("Mon, 06 Nov 1994 08:49:37 GMT") == reference)
    }

    @Test func twoDigitYears() {
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT", now: now2025) == reference)
        let y2030 = HTTPDate.parse("Wednesday, 01-Jan-30 00:00:00 GMT", now: now2025)
        #expect(y2030 == Date(timeIntervalSince1970: 1_893_456_000))
        let y1976 = HTTPDate.parse("Thursday, 01-Jan-76 00:00:00 GMT", now: now2025)
        #expect(y1976 == Date(timeIntervalSince1970: 189_302_400))
    }

    @Test func rejectsGarbage() {
        let bad = [
            "", "   ", "garbage", "0", "-1", "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Nov 1994 08:49:37 PST",
            "Sun, 06 Nov 1994 08:49:37 +0000", "Sun, 06 Foo 1994 08:49:37 GMT", "Xyz, 06 Nov 1994 08:49:37 GMT",
            "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 31 Nov 1994 08:49:37 GMT", "Sun, 29 Feb 1995 08:49:37 GMT",
            "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT",
            "Sun, 06 Nov 1994 08:49:61 GMT", "Sun, 06 Nov 1994 8:49:37 GMT", "Sun, 06 Nov 994 08:49:37 GMT",
            "Sun, 06 Nov 19940 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT extra", "Sun, 06-Nov 1994 08:49:37 GMT",
            "Sun Nov  6 08:49:37 94", "Sun Nov  6 08:49:37 1994 GMT", "Sun, 006 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 0000 08:49:37 GMT", "Sun,06 Nov 1994 08:49:37 GMT", String(repeating: "Sun, ", count: 100),
            "Sun, 06 Nov 1994 08:49:37 GMT\u{0}", "Sun, ０６ Nov 1994 08:49:37 GMT",
        ]
        for s in bad {
            #expect(HTTPDate.parse(s) == nil, "\(s)")
        }
    }

    @Test func leapDaysAndSeconds() {
        #expect(HTTPDate.parse("Thu, 29 Feb 2024 12:00:00 GMT") == Date(timeIntervalSince1970: 1_709_208_000))
        #expect(HTTPDate.parse("Tue, 29 Feb 2000 00:00:00 GMT") != nil)
        #expect(HTTPDate.parse("Thu, 29 Feb 1900 00:00:00 GMT") == nil)
        #expect(HTTPDate.parse("Sat, 31 Dec 2016 23:59:60 GMT") == Date(timeIntervalSince1970: 1_483_228_800))
    }

    @Test func format() {
        #expect(HTTPDate.format(reference) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 0)) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 784_111_777.9)) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: -1)) == "Wed, 31 Dec 1969 23:59:59 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: 1_709_208_000)) == "Thu, 29 Feb 2024 12:00:00 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: .infinity)) == "Fri, 31 Dec 9999 23:59:59 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: -.infinity)) == "Mon, 01 Jan 0001 00:00:00 GMT")
        #expect(HTTPDate.format(Date(timeIntervalSince1970: .nan)) == "Thu, 01 Jan 1970 00:00:00 GMT")
    }

    @Test func roundTrip() {
        var t: TimeInterval = -2_000_000_000
        while t < 4_000_000_000 {
            let d = Date(timeIntervalSince1970: t)
            #expect(HTTPDate.parse(HTTPDate.format(d)) == d)
            t += 86_400 * 37 + 3_671
        }
    }

    @Test func independentOfFoundationCalendarAgreement() {
        // Cross-check against a GMT Gregorian calendar for a spread of dates.
        var cal = Calendar(identifier: .gregorian)
        cal.timeZone = TimeZone(identifier: "GMT")!
        for t in stride(from: -5_000_000_000.0, to: 5_000_000_000.0, by: 123_456_789.0) {
            let d = Date(timeIntervalSince1970: t)
            let c = cal.dateComponents([.year, .month, .day, .hour, .minute, .second], from: d)
            let (y, m, day) = HTTPDate.civilFromDays(Int(HTTPDate.floorDiv(Int64(t), 86_400)))
            #expect(y == c.year && m == c.month && day == c.day)
        }
    }
}

@Suite struct RetryAfterTests {
    let now = Date(timeIntervalSince1970: 784_111_777)

    @Test func deltaSeconds() {
        #expect(RetryAfter.delay("120", now: now) == 120)
        #expect(RetryAfter.delay("0", now: now) == 0)
        #expect(RetryAfter.delay("  42\t", now: now) == 42)
        #expect(RetryAfter.delay("007", now: now) == 7)
    }

    @Test func hugeDeltaIsFinite() {
        let d = RetryAfter.delay("99999999999999999999999", now: now)
        #expect(d != nil && d!.isFinite && d! > 1e22)
        let e = RetryAfter.delay(String(repeating: "9", count: 400), now: now)
        #expect(e != nil && e!.isFinite)
    }

    @Test func httpDate() {
        #expect(RetryAfter.delay("Sun, 06 Nov 1994 08:51:37 GMT", now: now) == 120)
        #expect(RetryAfter.delay("Sun, 06 Nov 1994 08:49:37 GMT", now: now) == 0)
        #expect(RetryAfter.delay("Sun, 06 Nov 1994 08:00:00 GMT", now: now) == 0)  // past
        #expect(RetryAfter.delay("Sunday, 06-Nov-94 08:50:37 GMT", now: now) == 60)
        #expect(RetryAfter.delay("Sun Nov  6 08:49:47 1994", now: now) == 10)
    }

    @Test func rejects() {
        for s in ["", "   ", "-1", "-0", "+5", "1.5", "1e3", "12abc", "abc", "0x10", "5 s", "٣", "Sun, 06 Nov 1994"] {
            #expect(RetryAfter.delay(s, now: now) == nil, "\(s)")
        }
    }
}
