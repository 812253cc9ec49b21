import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

// The platform floor for scripts/bench: one URLSession data task on a serial delegate queue whose
// delegate only counts the bytes (no file, no checks). ferry cannot download faster than this with
// URLSession on Linux; the gap between this row and ferry's is what ferry itself costs.
// Usage: URLSessionFloor URL
final class Counter: NSObject, URLSessionDataDelegate, Sendable {
    let bytes = Atomic<Int64>(0)
    let done = DispatchSemaphore(value: 0)
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        bytes.add(Int64(data.count), ordering: .relaxed)
    }
    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        if let error { FileHandle.standardError.write(Data("error: \(error)\n".utf8)) }
        done.signal()
    }
}

guard CommandLine.arguments.count == 2, let url = URL(string: CommandLine.arguments[1]) else {
    FileHandle.standardError.write(Data("usage: URLSessionFloor URL\n".utf8))
    exit(2)
}
let counter = Counter()
let queue = OperationQueue()
queue.maxConcurrentOperationCount = 1
let session = URLSession(configuration: .ephemeral, delegate: counter, delegateQueue: queue)
var request = URLRequest(url: url)
request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
session.dataTask(with: request).resume()
counter.done.wait()
print(counter.bytes.load(ordering: .relaxed))
