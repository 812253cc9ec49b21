@_spi(Testing) import FerryEngine
import FerryCore
import Foundation
import Testing
import TestHTTPServer

/// The figures the engine gives every surface, against what really moved (issue 41). How exact a rate is, is
/// RateEstimatorTests' to say on a clock of its own; here, what only the running engine shows.
@Suite struct HonestFigureTests {
    let server: TestHTTPServer
    let dir: TempDir

    init() throws {
        server = try TestHTTPServer()
        dir = try TempDir()
    }

    /// `ferry list --json` gives a running item's rate, the one every surface shows (it had none: the records a
    /// list reads keep no rate).
    @Test func aListGivesARunningItemsRate() async throws {
        let pace = 256 << 10
        server.route("/paced.bin", .serve(Resource(body: Resource.randomBytes(count: 16 << 20, seed: 43)),
                                          ServeOptions(bytesPerSecond: pace)))
        let state = dir.path + "/state"
        let config = dir.path + "/ferry.toml"
        try "[engine]\nlinger = 60\n".write(toFile: config, atomically: true, encoding: .utf8)
        let added = try await runFerry(["get", "--detach", "-o", dir.path, server.url("/paced.bin").absoluteString, "--config", config],
                                       stateDir: state)
        #expect(added.status == 0, "\(added.stderr)")
        var listed: [String: Any] = [:]
        let deadline = Date().addingTimeInterval(60)
        while listed["bytesPerSecond"] == nil, Date() < deadline {
            let list = try await runFerry(["list", "--json", "--config", config], stateDir: state)
            let items = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]]
            listed = items?.first ?? [:]
            if listed["bytesPerSecond"] == nil { try await Task.sleep(for: .milliseconds(200)) }
        }
        _ = try await runFerry(["stop", "--config", config], stateDir: state)
        #expect(listed["state"] as? String == "running")
        let rate = try #require(listed["bytesPerSecond"] as? Int, "\(listed)")
        // The server's pace, roughly (how close is RateEstimatorTests' to say): a rate, not a count of bytes.
        #expect(rate > pace / 4 && rate < pace * 2, "\(rate) B/s for \(pace)")
    }
}
