import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import FerryTransport

// The platform floor for scripts/bench: the least URLSession on Linux does for each case, with a
// delegate on a serial queue that does nothing but count. ferry cannot be faster than this with
// URLSession; the gap between this row and ferry's is what ferry itself costs.
//   URLSessionFloor get URL...            data tasks, bytes discarded, at most -j at once
//   URLSessionFloor get -o FILE URL       one data task whose bytes go to FILE, each chunk written as it
//                                         comes (write(2), no buffer): the floor of a client that keeps them
//   URLSessionFloor get -j N -i LIST      the same for every URL in LIST (one per line)
//   URLSessionFloor put FILE URL          a PUT whose body is FILE, streamed with Content-Length
//   URLSessionFloor form FILE URL         a multipart POST of FILE (field "file") plus note=bench
//   FLOOR_TRANSPORT=ferry URLSessionFloor ...   the same with ferry's transport under URLSession
//                                         (FerryURLProtocol): the floor of what ferry's engine adds

final class Counter: NSObject, URLSessionDataDelegate, Sendable {
    let bytes = Atomic<Int64>(0)
    let failures = Atomic<Int>(0)
    let finished: @Sendable () -> Void
    let stream: @Sendable () -> InputStream?
    /// Where received bytes go (-1: nowhere).
    let output: Int32

    init(output: Int32 = -1, stream: @escaping @Sendable () -> InputStream? = { nil }, finished: @escaping @Sendable () -> Void) {
        self.output = output
        self.stream = stream
        self.finished = finished
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        bytes.add(Int64(data.count), ordering: .relaxed)
        guard output >= 0 else { return }
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = write(output, raw.baseAddress! + offset, raw.count - offset)
                if n < 0 { if errno == EINTR { continue }; fail("cannot write: \(String(cString: strerror(errno)))") }
                offset += n
            }
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void) {
        completionHandler(stream())
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        let status = (task.response as? HTTPURLResponse)?.statusCode ?? 0
        if error != nil || !(200..<300).contains(status) {
            failures.add(1, ordering: .relaxed)
            FileHandle.standardError.write(Data("\(task.originalRequest?.url?.absoluteString ?? ""): \(error.map { "\($0)" } ?? "HTTP \(status)")\n".utf8))
        }
        finished()
    }
}

/// The smallest body stream that works on Linux (see docs/platform.md): header bytes,
/// the file read with pread, trailer bytes.
final class FileBodyStream: InputStream {
    private let head: [UInt8], tail: [UInt8]
    private let fd: Int32
    private let fileLength: Int64
    private var position: Int64 = 0
    private var ended = false

    init(head: [UInt8], path: String, tail: [UInt8]) {
        self.head = head
        self.tail = tail
        fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        var st = stat()
        fstat(fd, &st)
        fileLength = Int64(st.st_size)
        super.init(data: Data())
    }

    deinit { Glibc.close(fd) }

    var length: Int64 { Int64(head.count) + fileLength + Int64(tail.count) }

    override func open() {}
    override func close() {}
    override var streamStatus: Stream.Status { ended ? .atEnd : .open }
    override var streamError: Error? { nil }
    override var hasBytesAvailable: Bool { !ended }
    override func getBuffer(_ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length: UnsafeMutablePointer<Int>) -> Bool { false }
    override func property(forKey key: PropertyKey) -> AnyObject? { nil }
    override func setProperty(_ property: AnyObject?, forKey key: PropertyKey) -> Bool { false }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        let headEnd = Int64(head.count), fileEnd = headEnd + fileLength
        if position < headEnd {
            let n = min(len, Int(headEnd - position))
            head.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress! + Int(position), count: n) }
            position += Int64(n)
            return n
        }
        if position < fileEnd {
            let n = pread(fd, buffer, min(len, Int(fileEnd - position)), off_t(position - headEnd))
            guard n > 0 else { return -1 }
            position += Int64(n)
            return n
        }
        let n = min(len, Int(length - position))
        if n == 0 { ended = true; return 0 }
        tail.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress! + Int(position - fileEnd), count: n) }
        position += Int64(n)
        return n
    }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("URLSessionFloor: \(message)\n".utf8))
    exit(2)
}

func session(_ delegate: Counter, connections: Int) -> URLSession {
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = 1
    let configuration = URLSessionConfiguration.ephemeral
    configuration.httpMaximumConnectionsPerHost = connections
    if ProcessInfo.processInfo.environment["FLOOR_TRANSPORT"] == "ferry" {
        configuration.protocolClasses = [FerryURLProtocol.self]
    }
    return URLSession(configuration: configuration, delegate: delegate, delegateQueue: queue)
}

var arguments = Array(CommandLine.arguments.dropFirst())
guard let mode = arguments.first else { fail("usage: URLSessionFloor get|put|form ...") }
arguments.removeFirst()
let done = DispatchSemaphore(value: 0)

switch mode {
case "get":
    var concurrency = 1
    var urls: [URL] = []
    var output: Int32 = -1
    while let argument = arguments.first {
        arguments.removeFirst()
        switch argument {
        case "-j": concurrency = arguments.isEmpty ? 0 : Int(arguments.removeFirst()) ?? 0
        case "-o":
            guard let path = arguments.first else { fail("-o needs a file") }
            arguments.removeFirst()
            output = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard output >= 0 else { fail("cannot open \(path): \(String(cString: strerror(errno)))") }
        case "-i":
            guard let path = arguments.first, let list = try? String(contentsOfFile: path, encoding: .utf8) else { fail("-i needs a readable file") }
            arguments.removeFirst()
            urls += list.split(separator: "\n").compactMap { URL(string: String($0)) }
        default:
            guard let url = URL(string: argument) else { fail("not a URL: \(argument)") }
            urls.append(url)
        }
    }
    guard concurrency > 0, !urls.isEmpty else { fail("get needs URLs and -j > 0") }
    guard output < 0 || urls.count == 1 else { fail("-o takes one URL") }
    // At most `concurrency` tasks exist at once, as in an engine that starts one when one ends.
    let pending = Mutex(urls[...])
    let counter = Counter(output: output, finished: { done.signal() })
    let s = session(counter, connections: concurrency)
    let startNext: @Sendable () -> Void = {
        guard let url = pending.withLock({ $0.popFirst() }) else { return }
        var request = URLRequest(url: url)
        request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
        s.dataTask(with: request).resume()
    }
    for _ in 0..<concurrency { startNext() }
    for _ in urls {
        done.wait()
        startNext()
    }
    print(counter.bytes.load(ordering: .relaxed))
    exit(counter.failures.load(ordering: .relaxed) == 0 ? 0 : 1)
case "put", "form":
    guard arguments.count == 2, let url = URL(string: arguments[1]) else { fail("\(mode) needs FILE URL") }
    let path = arguments[0]
    let boundary = "floor-boundary-7d1c"
    let head = mode == "put" ? [] : Array(("--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n"
        + "Content-Type: application/octet-stream\r\n\r\n").utf8)
    let tail = mode == "put" ? [] : Array("\r\n--\(boundary)\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nbench\r\n--\(boundary)--\r\n".utf8)
    let length = FileBodyStream(head: head, path: path, tail: tail).length
    let counter = Counter(stream: { FileBodyStream(head: head, path: path, tail: tail) }, finished: { done.signal() })
    var request = URLRequest(url: url)
    request.httpMethod = mode == "put" ? "PUT" : "POST"
    request.setValue(mode == "put" ? "application/octet-stream" : "multipart/form-data; boundary=\(boundary)",
                     forHTTPHeaderField: "Content-Type")
    // Content-Length with blank Transfer-Encoding and Expect: a plain body (docs/platform.md).
    request.setValue(String(length), forHTTPHeaderField: "Content-Length")
    request.setValue(" ", forHTTPHeaderField: "Transfer-Encoding")
    request.setValue(" ", forHTTPHeaderField: "Expect")
    session(counter, connections: 1).uploadTask(withStreamedRequest: request).resume()
    done.wait()
    exit(counter.failures.load(ordering: .relaxed) == 0 ? 0 : 1)
default:
    fail("unknown mode \(mode); use get, put or form")
}
