import Foundation
import TestHTTPServer

// A local server for scripts/tui-e2e: throttled files so progress bars visibly move.
// Prints "PORT <n>", then a line per request, and serves until killed. Not shipped.
//
// With `--upload ietf|tus|plain [--cut-after BYTES]`: an upload server for scripts/torture and scripts/bench
// instead (TestUploadServer: swift-nio-extras' IETF resumable uploads, tus 1.0, or plain PUTs), which cuts
// the first connection that reaches BYTES; `GET /_stats` answers the body bytes it received and the uploads
// it stored with their SHA-256. Prints "PORT <n>" and serves until killed.
if let flag = CommandLine.arguments.firstIndex(of: "--upload"), flag + 1 < CommandLine.arguments.count,
   let kind = TestUploadServer.Kind(rawValue: CommandLine.arguments[flag + 1]) {
    let uploads = try TestUploadServer(kind)
    uploads.keepsBytes = false
    if let cut = CommandLine.arguments.firstIndex(of: "--cut-after"), cut + 1 < CommandLine.arguments.count,
       let bytes = Int64(CommandLine.arguments[cut + 1]) {
        uploads.cutOnce(after: bytes)
    }
    FileHandle.standardOutput.write(Data("PORT \(uploads.port)\n".utf8))
    while true { sleep(60) }
}
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
// A download that outlives an SSH drop and still ends within a test: 3 MiB at 192 KiB/s, 16 s.
let drop = Resource.randomBytes(count: 3 * mib, seed: 11)
server.route("/drop.bin", .serve(Resource(body: drop), ServeOptions(bytesPerSecond: 192 * 1024)))
// A tree for `get -r` (scripts/tui-e2e: one row that opens, pause and resume of the whole batch): an nginx-style
// index of /tree/ and /tree/sub/, six files of 2 MiB at 32 KiB/s (a minute each) and a small one; /tree/slow/ is
// an empty directory whose listing comes 10 s late (the row says the walk under way meanwhile).
func index(_ names: [String]) -> Data {
    Data(("<html><head><title>Index of /</title></head><body><h1>Index of /</h1><hr><pre><a href=\"../\">../</a>\n"
        + names.map { "<a href=\"\($0)\">\($0)</a>\n" }.joined() + "</pre><hr></body></html>\n").utf8)
}
server.route("/tree/", .serve(Resource(body: index(["sub/", "slow/", "t1.bin", "t2.bin", "t3.bin"]), contentType: "text/html")))
server.route("/tree/slow/", .serve(Resource(body: index([]), contentType: "text/html"), ServeOptions(delayBeforeHead: 10)))
server.route("/tree/sub/", .serve(Resource(body: index(["t4.bin", "t5.bin", "t6.bin", "small.txt"]), contentType: "text/html")))
for (index, path) in ["/tree/t1.bin", "/tree/t2.bin", "/tree/t3.bin", "/tree/sub/t4.bin", "/tree/sub/t5.bin", "/tree/sub/t6.bin"].enumerated() {
    server.route(path, .serve(Resource(body: Resource.randomBytes(count: 2 * mib, seed: UInt64(20 + index))), ServeOptions(bytesPerSecond: 32 * 1024)))
}
server.route("/tree/sub/small.txt", .serve(Resource(body: Data("small\n".utf8))))
// With a directory argument, the bodies a script compares downloads with.
if CommandLine.arguments.count > 1 {
    try drop.write(to: URL(fileURLWithPath: CommandLine.arguments[1] + "/drop.bin"))
}
FileHandle.standardOutput.write(Data("PORT \(server.port)\n".utf8))
// Every request as it arrives, "REQUEST <path> <Range or ->", so a script can count them.
var shown = 0
while true {
    let all = server.allRequests
    for request in all.dropFirst(shown) {
        FileHandle.standardOutput.write(Data("REQUEST \(request.path) \(request.header("Range") ?? "-")\n".utf8))
    }
    shown = all.count
    usleep(200_000)
}
