@testable import FerryCore
import Foundation
import Testing

/// The estimate of clean idle connections that decides when a download warms up a connection first.
@Suite struct ConnectionWarmthTests {
    let origin = "http://example.org:80"

    func take(_ warmth: inout ConnectionWarmth, _ origin: String, now: TimeInterval) -> Bool {
        warmth.takeClean(origin, now: now)
    }

    @Test func originsNameSchemeHostAndPort() {
        #expect(ConnectionWarmth.origin(of: URL(string: "http://Example.org/a")!) == "http://example.org:80")
        #expect(ConnectionWarmth.origin(of: URL(string: "https://example.org/a")!) == "https://example.org:443")
        #expect(ConnectionWarmth.origin(of: URL(string: "http://example.org:8080/a")!) == "http://example.org:8080")
    }

    @Test func aConnectionLeftWhileTheSessionIsIdleIsCleanAndTakenOnce() {
        var warmth = ConnectionWarmth()
        warmth.taskEnded(leavingIdle: origin, sessionIdle: true, now: 10)
        #expect(take(&warmth, origin, now: 11))
        #expect(!take(&warmth, origin, now: 11))
    }

    @Test func aConnectionLeftWhileOthersRunIsDirtyUntilTheSessionIsIdle() {
        var warmth = ConnectionWarmth()
        warmth.taskEnded(leavingIdle: origin, sessionIdle: false, now: 10)
        #expect(!take(&warmth, origin, now: 10.5))
        warmth.taskEnded(leavingIdle: origin, sessionIdle: false, now: 11)
        // The last task ends without leaving a connection (it failed): the two left before are clean now.
        warmth.taskEnded(leavingIdle: nil, sessionIdle: true, now: 12)
        #expect(take(&warmth, origin, now: 12))
        #expect(take(&warmth, origin, now: 12))
        #expect(!take(&warmth, origin, now: 12))
    }

    @Test func connectionsIdleTooLongAreNotCounted() {
        var warmth = ConnectionWarmth()
        warmth.taskEnded(leavingIdle: origin, sessionIdle: true, now: 10)
        #expect(!take(&warmth, origin, now: 10 + ConnectionWarmth.freshFor))
    }

    @Test func otherOriginsAreApart() {
        var warmth = ConnectionWarmth()
        warmth.taskEnded(leavingIdle: origin, sessionIdle: true, now: 10)
        #expect(!take(&warmth, "https://example.org:443", now: 10))
        #expect(take(&warmth, origin, now: 10))
    }
}
