@_spi(Testing) import FerryEngine
@testable import FerryCore
@testable import FerryEngine
@testable import FerryModel
@testable import FerryStorage
@testable import FerryTransport
import Foundation
import Testing
import TestHTTPServer

/// URLSession on Linux has no backpressure: its socket thread queues every chunk for the delegate and
/// reads on. These tests pin the platform behaviour and ferry's bounded delegate queue against it, with
/// a real session and a real server, in a process of its own (Tests/DelegateQueueProbe): all sessions of
/// a process share one socket thread, so the engines of the other tests would take part in the measure.
@Suite struct DelegateQueueTests {
    struct Probe {
        var peak = 0, bytes = 0, error = 0, limit = 0
    }

    let server: TestHTTPServer
    let size = 8 << 20

    init() throws {
        server = try TestHTTPServer()
        server.route("/file.bin", .serve(Resource(body: Resource.randomBytes(count: size, seed: 77))))
        // Faster than the probe's delegate (16 KiB per 2 ms, ~8 MiB/s), slower than the socket thread can read.
        server.route("/paced.bin", .serve(Resource(body: Resource.randomBytes(count: 32 << 20, seed: 78)),
                                          ServeOptions(bytesPerSecond: 24 << 20)))
    }

    func probe(_ mode: String, _ path: String = "/file.bin") async throws -> Probe {
        let fields = try await runProbe([mode, server.url(path).absoluteString])
        return Probe(peak: fields["peak"] ?? 0, bytes: fields["bytes"] ?? 0, error: fields["error"] ?? 0,
                     limit: fields["limit"] ?? 0)
    }

    @Test func aPlainDelegateQueueGrowsWithoutBoundWhenTheDelegateIsSlow() async throws {
        // The platform behaviour the bounded queue exists for (8 MiB, 2 ms per chunk: the socket is far ahead).
        let plain = try await probe("plain")
        #expect(plain.bytes == size)
        #expect(plain.peak > 2 * TransferManager.delegateQueueLimit)
    }

    @Test func theBoundedQueueHoldsTheSocketThreadBackAndLosesNothing() async throws {
        let bounded = try await probe("bounded")
        #expect(bounded.error == 0)
        #expect(bounded.bytes == size)
        #expect(bounded.limit == TransferManager.delegateQueueLimit)
        // A wait gives up after 20 ms (see the type); a machine that stalls the delegate that long can add a few.
        #expect(bounded.peak <= bounded.limit + 8)
    }

    @Test func aCancelFromTheDelegateQueueNeitherWaitsNorLiftsTheBackpressure() async throws {
        // cancel() runs a block on the session's work queue and waits for it, and while the server sends faster
        // than the socket thread reads, that block runs only after the rest of the body. BoundedDelegateQueue.cancel
        // makes the call on a queue of its own, so the delegate queue keeps draining and the bound holds; a
        // cancel made on the delegate queue (with the backpressure lifted, or the socket thread would wait for
        // it for ever) let the rest of the body pile up: peak 261 for the fast body, 27 for the paced one. Where the cancel lands
        // depends on the machine: usually at once for the paced body (seen: ~14-16 MiB of 32), after the
        // whole fast one, and on a loaded machine after the whole paced one (seen once in CI). Either way
        // nothing is lost or cut short silently.
        for (path, size) in [("/paced.bin", 32 << 20), ("/file.bin", size)] {
            let cancelled = try await probe("cancel", path)
            #expect(cancelled.error == NSURLErrorCancelled || (cancelled.error == 0 && cancelled.bytes == size))
            #expect(cancelled.bytes >= 4 << 20)
            #expect(cancelled.peak <= cancelled.limit + 8, "\(path)")
        }
    }

    @Test func aTaskMadeFromTheDelegateQueueNeitherWaitsNorLiftsTheBackpressure() async throws {
        // Making a task waits for the session's work queue as a cancel does (createNextTaskIdentifier), so
        // behind a fast body it waited for the rest of it, and the engine made its tasks with the backpressure
        // lifted: `ferry get -j 2` of a 1 GiB file and small ones peaked at 1.2 GiB RSS on loopback. SessionTask
        // makes them on the call queue with the bound in place. Made and resumed on the delegate queue itself,
        // this HEAD stalls the delegate behind the socket thread's reading, each of whose waits then gives up
        // after 20 ms: peak 1997 of 16 for the paced body, 260 for the fast one, and seconds longer.
        for (path, size) in [("/paced.bin", 32 << 20), ("/file.bin", size)] {
            let made = try await probe("make", path)
            #expect(made.error == 0, "\(path)")
            #expect(made.bytes == size, "\(path)")
            #expect(made.peak <= made.limit + 8, "\(path)")
        }
    }

    @Test func theEngineUsesTheBoundedQueue() throws {
        let manager = try TransferManager(configuration: testConfiguration())
        defer { manager.shutdown() }
        #expect((manager.session.delegateQueue as? BoundedDelegateQueue)?.limit == TransferManager.delegateQueueLimit)
    }
}
