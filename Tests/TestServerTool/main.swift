import Foundation
import TestHTTPServer

// A local server for scripts/tui-e2e: throttled files so progress bars visibly move.
// Prints "PORT <n>" and serves until killed. Not shipped.
let server = try TestHTTPServer()
let mib = 1 << 20
for (index, rate) in [64, 96, 128, 160, 192].enumerated() {
    // /slow1 ... /slow5: 8 MiB each at 64..192 KiB/s: minutes long, so the bars move throughout a test.
    server.route("/slow\(index + 1).bin", .serve(Resource(body: Resource.randomBytes(count: 8 * mib, seed: UInt64(index + 1))),
                                                ServeOptions(bytesPerSecond: rate * 1024)))
}
// Small and quick: for "a + URL adds and completes a download".
server.route("/quick.bin", .serve(Resource(body: Resource.randomBytes(count: 256 * 1024, seed: 99)), ServeOptions(bytesPerSecond: 512 * 1024)))
// No Content-Length: an indeterminate bar.
server.route("/unknown.bin", .serve(Resource(body: Resource.randomBytes(count: 8 * mib, seed: 7)),
                                    ServeOptions(sendContentLength: false, bytesPerSecond: 64 * 1024)))
FileHandle.standardOutput.write(Data("PORT \(server.port)\n".utf8))
while true { sleep(3600) }
