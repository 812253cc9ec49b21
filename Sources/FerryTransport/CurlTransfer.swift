import CCurl
import FerryModel
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// One request of a URLSession task on libcurl, hop by hop through redirects. Made on the task's work queue,
/// then touched only on the transport's thread, except `delivery`, which hands results to the task's work queue.
final class CurlTransfer: @unchecked Sendable {
    /// Bytes read are handed on in pieces of up to this size: at the end of each round of the transport's
    /// loop, or sooner when this much has come (one hop to the work queue and one to the delegate per piece).
    /// (Half the transfer's in-flight bound, so that two pieces can be on their way: 512 KiB for one
    /// transfer, 256 KiB for eight; 256 KiB for a lone 1 GiB download cost 0.1 s more CPU in hops.)
    static let maxDeliverySize = 512 << 10
    private var deliverySize: Int { min(Self.maxDeliverySize, maxBytesInFlight / 2) }
    /// At most `CurlTransport.inFlightBound` bytes of a transfer are on their way to the delegate (on the
    /// work queue, on the delegate queue); past it the transfer pauses, libcurl stops reading its socket and
    /// TCP slows the sender.
    private var maxBytesInFlight: Int { courier.maxBytesInFlight }
    static let maxRedirects = 20
    /// What a request on a connection that was closed meanwhile ends with before any answer.
    static let staleConnectionResults: Set<Int> = [Int(FERRY_CURLE_PARTIAL_FILE), Int(FERRY_CURLE_HTTP2), Int(FERRY_CURLE_HTTP2_STREAM), Int(FERRY_CURLE_GOT_NOTHING),
                                                   Int(FERRY_CURLE_SEND_ERROR), Int(FERRY_CURLE_RECV_ERROR)]
    /// Bytes a second under which a transfer counts as stalled for the idle timeout (bandwidth limits pause
    /// the transfer instead of slowing it under this: curl does not judge a paused transfer's speed).
    static let stallRate = 10

    let courier: Courier
    var delivery: Courier.Delivery { courier.delivery }
    private let transport: CurlTransport
    private let task: URLSessionTask
    private let delegate: TransportDelegate?
    private let settings: TransportSettings
    private let originalURL: URL?
    private var request: URLRequest
    private var body: BodySource?
    private var hops = 0
    /// sftp, scp, ftp: what a protocol of remote files adds (FileWire); nil for http(s).
    private let file: FileWire?

    private(set) var easy: UnsafeMutableRawPointer?
    /// This hop asked for HTTP/2 (it may be a stream on a shared connection).
    private(set) var askedForHTTP2 = false
    private var headerList: UnsafeMutableRawPointer?
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(FERRY_CURL_ERROR_SIZE))
    private var response = ResponseHead()
    private var responseDelivered = false
    /// The request went out again on a new connection after a cached one turned out closed (once).
    private var freshConnection = false
    /// The next hop, when this response is a redirect being followed (its body is dropped).
    private var redirect: URLRequest?
    private var bodyFailure: String?
    private var bodyFailureKind: FailureKind?
    private var finished = false

    /// Read, not yet handed on (see deliverySize).
    private var pending = Data()
    /// Body bytes read in this hop.
    private var received = 0
    /// What is left of the body by its Content-Length (0 when unknown): a small file's piece is sized to
    /// the file, not to deliverySize (a thousand small files otherwise held 512 KiB each: 120 MiB RSS).
    private var expectedRemaining: Int {
        guard let length = response.value("Content-Length").flatMap(Int.init) else { return 0 }
        return max(0, length - received)
    }

    /// The limits this transfer answers to (asked once), and its pace under them (RatePacer: its share's
    /// bucket, the engine's, when a transfer paused for its rate may go on, what it took in). Transport thread only.
    private(set) var limits: LimitMembership?
    private(set) var pacer = RatePacer()

    init(request: URLRequest, task: URLSessionTask, delegate: TransportDelegate?, settings: TransportSettings, delivery: Courier.Delivery, transport: CurlTransport) {
        self.request = request
        self.task = task
        self.delegate = delegate
        self.courier = Courier(delivery: delivery, transport: transport, delegate: delegate)
        self.transport = transport
        self.settings = settings
        self.originalURL = request.url
        self.file = FileWire(request: request, settings: settings)
        // Weak: the courier is the transfer's own (a strong capture would keep every finished transfer).
        courier.drained = { [transport, weak self] in if let self { transport.submit(.unpause(self)) } }
    }

    deinit {
        releaseHandle()
        errorBuffer.deallocate()
    }

    // MARK: Easy handles (transport thread)

    /// The easy handle for the current hop, configured; nil when the transfer failed instead.
    func makeEasyHandle() -> UnsafeMutableRawPointer? {
        releaseHandle()
        response = ResponseHead()
        received = 0
        redirect = nil
        errorBuffer[0] = 0
        guard let url = request.url, let handle = ferry_curl_easy_init() else {
            failToStart("cannot start a request for \(request.url?.absoluteString ?? "no URL")")
            return nil
        }
        easy = handle
        if hops == 0 { limits = delegate?.transportLimits(for: task) }
        if hops == 0, let made = delegate?.transportBody(for: task) {
            switch made {
            case let .stream(stream): body = StreamBodySource(stream)
            case let .pipe(path): body = PipeBodySource(path: path)
            }
            body?.onReady = { [transport, self] in transport.submit(.unpause(self)) }
        }
        let me = Unmanaged.passUnretained(self).toOpaque()
        func set(_ option: Int, _ value: Int) { _ = ferry_curl_easy_setopt_long(handle, option, value) }
        func set(_ option: Int, _ value: String) { _ = ferry_curl_easy_setopt_pointer(handle, option, value) }

        set(FERRY_CURLOPT_URL, url.absoluteString)
        set(FERRY_CURLOPT_NOSIGNAL, 1)
        set(FERRY_CURLOPT_TCP_KEEPALIVE, 1)
        set(FERRY_CURLOPT_BUFFERSIZE, transport.receiveBufferSize)
        set(FERRY_CURLOPT_UPLOAD_BUFFERSIZE, CurlTransport.sendBufferSize)
        _ = ferry_curl_easy_setopt_pointer(handle, FERRY_CURLOPT_ERRORBUFFER, errorBuffer)
        // The idle timeout: no byte for this long, or a trickle under `stallRate` (a byte a second would
        // otherwise hold a slot for ever), ends the attempt.
        let idle = max(1, Int(request.timeoutInterval.rounded(.up)))
        set(FERRY_CURLOPT_CONNECTTIMEOUT, idle)
        set(FERRY_CURLOPT_LOW_SPEED_LIMIT, Self.stallRate)
        set(FERRY_CURLOPT_LOW_SPEED_TIME, idle)
        _ = ferry_curl_easy_setopt_callback(handle, FERRY_CURLOPT_WRITEFUNCTION, curlWrite)
        _ = ferry_curl_easy_setopt_pointer(handle, FERRY_CURLOPT_WRITEDATA, me)
        if body != nil {
            _ = ferry_curl_easy_setopt_callback(handle, FERRY_CURLOPT_READFUNCTION, curlRead)
            _ = ferry_curl_easy_setopt_pointer(handle, FERRY_CURLOPT_READDATA, me)
        }
        if let file {
            if let (kind, refusal) = file.refusal {
                fail(code: .unsupportedURL, kind: kind, refusal)
                releaseHandle()
                return nil
            }
            file.configure(handle, bodyLength: request.value(forHTTPHeaderField: "Content-Length").flatMap { Int64($0) })
            return handle
        }

        set(FERRY_CURLOPT_PROTOCOLS_STR, "http,https")
        _ = ferry_curl_easy_setopt_callback(handle, FERRY_CURLOPT_HEADERFUNCTION, curlHeader)
        _ = ferry_curl_easy_setopt_pointer(handle, FERRY_CURLOPT_HEADERDATA, me)
        // https: HTTP/2 where the server offers it (ALPN), its transfers to one host sharing a connection as
        // streams (PIPEWAIT: a transfer waits for a connection being set up rather than opening another);
        // http: HTTP/1.1 (docs/transport.md). A transfer under a bandwidth limit keeps HTTP/1.1 and a
        // connection of its own: libcurl 7.88 holds a paused stream's data in its 32 MiB stream window
        // instead of holding the server back (an item limited to 512 KiB/s drew 5.6 MiB in 4 s from the server),
        // while a socket's receive buffer holds back one connection only.
        // Its connections are kept apart from the others' (CurlTransport.limitedConnections says why).
        let limited = limits?.limited ?? false
        askedForHTTP2 = url.scheme?.lowercased() == "https" && !limited
        if freshConnection { set(FERRY_CURLOPT_FRESH_CONNECT, 1) }
        if askedForHTTP2 {
            set(FERRY_CURLOPT_HTTP_VERSION, FERRY_CURL_HTTP_VERSION_2TLS)
            set(FERRY_CURLOPT_PIPEWAIT, 1)
        } else {
            set(FERRY_CURLOPT_HTTP_VERSION, FERRY_CURL_HTTP_VERSION_1_1)
        }
        if limited, let cache = transport.limitedConnections { _ = ferry_curl_easy_setopt_pointer(handle, FERRY_CURLOPT_SHARE, cache) }
        // Bytes are handed over as the server sent them (downloads ask for identity; ranges count raw bytes).
        set(FERRY_CURLOPT_HTTP_CONTENT_DECODING, 0)
        set(FERRY_CURLOPT_FOLLOWLOCATION, 0)
        set(FERRY_CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
        // Proxies as curl reads them from the environment, but stated here: an empty proxy means none.
        set(FERRY_CURLOPT_PROXY, settings.proxy(for: url) ?? "")
        if let noProxy = settings.noProxy { set(FERRY_CURLOPT_NOPROXY, noProxy) }
        if let caFile = settings.caFile {
            set(FERRY_CURLOPT_CAINFO, caFile)
            set(FERRY_CURLOPT_PROXY_CAINFO, caFile)
        }
        if let caDirectory = settings.caDirectory { set(FERRY_CURLOPT_CAPATH, caDirectory) }

        let method = (request.httpMethod ?? "GET").uppercased()
        var headers = request.allHTTPHeaderFields ?? [:]
        let length = headers.first { $0.key.lowercased() == "content-length" }.flatMap { Int64($0.value) }
        for name in headers.keys where ["content-length", "transfer-encoding", "expect"].contains(name.lowercased()) {
            // A request without a body keeps an empty body's length (a tus creation POST says it has none).
            if body == nil, name.lowercased() == "content-length", headers[name] == "0" { continue }
            headers[name] = nil
        }
        if body != nil {
            if method == "POST" {
                set(FERRY_CURLOPT_POST, 1)
                _ = ferry_curl_easy_setopt_offset(handle, FERRY_CURLOPT_POSTFIELDSIZE_LARGE, length ?? -1)
                if length == nil { headers["Transfer-Encoding"] = "chunked" }
            } else {
                // PUT (or another method) with a body: chunked by libcurl itself when the length is unknown.
                set(FERRY_CURLOPT_UPLOAD, 1)
                _ = ferry_curl_easy_setopt_offset(handle, FERRY_CURLOPT_INFILESIZE_LARGE, length ?? -1)
                if method != "PUT" { set(FERRY_CURLOPT_CUSTOMREQUEST, method) }
            }
        } else if method == "HEAD" {
            set(FERRY_CURLOPT_NOBODY, 1)
        } else if method == "GET" {
            set(FERRY_CURLOPT_HTTPGET, 1)
        } else {
            set(FERRY_CURLOPT_CUSTOMREQUEST, method)
        }
        var lines = headers.compactMap { name, value -> String? in
            // A blank value would tell libcurl to drop a header of its own: send what was asked or nothing.
            let trimmed = HTTPText.trimmed(value)
            return trimmed.isEmpty ? nil : "\(name): \(trimmed)"
        }
        if body != nil { lines.append("Expect:") }  // no 100-continue round trip
        for line in lines { headerList = ferry_curl_slist_append(headerList, line) }
        if let headerList { _ = ferry_curl_easy_setopt_pointer(handle, FERRY_CURLOPT_HTTPHEADER, headerList) }
        return handle
    }

    private func releaseHandle() {
        if let easy { ferry_curl_easy_cleanup(easy) }
        easy = nil
        if let headerList { ferry_curl_slist_free_all(headerList) }
        headerList = nil
    }

    /// The transfer ended in libcurl: the next hop of a redirect to start, or nil when it is over.
    func finished(result: Int) -> CurlTransfer? {
        if let file, let easy { return finished(file, easy, result: result) }
        if result == FERRY_CURLE_OK || (redirect != nil && response.complete) {
            if let next = redirect {
                hops += 1
                guard hops <= Self.maxRedirects else {
                    fail(code: .httpTooManyRedirects, kind: .badResponse, "more than \(Self.maxRedirects) redirects from \(hostDescription(originalURL))")
                    return nil
                }
                request = next
                return self
            }
            deliverResponseIfNeeded()
            flush()
            finish { $0 { $1.urlProtocolDidFinishLoading($0) } }
            return nil
        }
        // A cached connection the server had closed while it sat idle (hypercorn closes an idle HTTP/2
        // connection after 5 s, and libcurl 7.88 took it for alive): a request without a body that got no answer
        // on it goes out again, once, on a new connection, as curl retries a dead reused connection itself.
        var connects = 0
        if let easy { _ = ferry_curl_easy_getinfo_long(easy, FERRY_CURLINFO_NUM_CONNECTS, &connects) }
        if connects == 0, !freshConnection, !responseDelivered, body == nil, received == 0, Self.staleConnectionResults.contains(result) {
            freshConnection = true
            return self
        }
        flush()
        var osError = 0
        if let easy { _ = ferry_curl_easy_getinfo_long(easy, FERRY_CURLINFO_OS_ERRNO, &osError) }
        let (code, kind, message) = TransportError.describe(result, curlMessage: String(cString: errorBuffer), osError: Int32(osError),
                                                            url: request.url, bodyFailure: bodyFailure,
                                                            idleTimeout: request.timeoutInterval,
                                                            proxy: request.url.flatMap(settings.proxy(for:)).flatMap { $0.isEmpty ? nil : $0 },
                                                            bodyFailureKind: bodyFailureKind)
        fail(code: code, kind: kind, message)
        return nil
    }

    /// A step of a remote file's protocol ended: the next one, or the end.
    private func finished(_ file: FileWire, _ easy: UnsafeMutableRawPointer, result: Int) -> CurlTransfer? {
        var osError = 0
        _ = ferry_curl_easy_getinfo_long(easy, FERRY_CURLINFO_OS_ERRNO, &osError)
        switch file.ended(easy, result: result, curlMessage: String(cString: errorBuffer), osError: Int32(osError),
                         idleTimeout: request.timeoutInterval) {
        case let .next(answer):
            if let answer { deliver(answer) }
            hops += 1
            return self
        case let .done(answer):
            if let answer { deliver(answer) }
            flush()
            finish { $0 { $1.urlProtocolDidFinishLoading($0) } }
        case let .failed(code, kind, message):
            flush()
            fail(code: code, kind: kind, message)
        }
        return nil
    }

    /// Removed from libcurl after a cancel (the client was told by URLSession itself).
    func stopped() {
        end()
    }

    /// This download is a stream of an HTTP/2 connection (its answer came over HTTP/2): what a limit cannot
    /// hold back (transport thread).
    var receivesAsStream: Bool { askedForHTTP2 && limits?.direction == .download && response.version.hasPrefix("HTTP/2") }

    /// Removed from libcurl because a limit now holds it back while it is an HTTP/2 stream: it ends with
    /// `movedForLimit`, and the engine starts it again from where it was (a Range), on a connection of its own.
    /// libcurl 7.88 cannot hold one stream back: a paused stream's data piles up in its window (a 512 MiB
    /// download limited to 64 KiB/s took RSS from 80 to 158 MB in 2 s and failed "Out of memory").
    func endedForLimit() {
        flush()
        fail(NSError(domain: NSURLErrorDomain, code: TransportCodes.movedForLimit,
                     userInfo: failureInfo("moved from an HTTP/2 stream to a connection of its own, where its bandwidth limit holds")))
    }

    private func end() {
        finished = true
        body?.close()
        releaseHandle()
    }

    func failToStart(_ message: String) {
        fail(code: .unknown, kind: .other, message)
    }

    private func fail(code: URLError.Code, kind: FailureKind, _ message: String) {
        var info = failureInfo(message)
        info[FailureKind.userInfoKey] = kind.rawValue
        fail(URLError(code, userInfo: info))
    }

    private func fail(_ error: Error) {
        finish { $0 { $1.urlProtocol($0, didFailWithError: error) } }
    }

    /// A failure's words and the URL it failed at, as URLSession's errors carry them.
    private func failureInfo(_ message: String) -> [String: Any] {
        var info: [String: Any] = [NSLocalizedDescriptionKey: message]
        if let url = request.url { info[NSURLErrorFailingURLErrorKey] = url }
        return info
    }

    private func finish(_ last: @escaping @Sendable (Courier.Delivery) -> Void) {
        end()
        deliver { delivery in
            last(delivery)
            delivery.end()
        }
    }

    // MARK: Delivery

    /// Hands what was read so far to URLSession (the transport calls it at the end of each round).
    func flush() {
        guard !pending.isEmpty else { return }
        let chunk = pending
        pending = Data()
        deliver(bytes: chunk.count) { $0 { $1.urlProtocol($0, didLoad: chunk) } }
    }

    /// Listed with the transport for the flush at the end of the round (transport thread).
    private var held = false

    func holdEnded() { held = false }

    private func deliver(bytes: Int = 0, _ work: @escaping @Sendable (Courier.Delivery) -> Void) {
        courier.deliver(bytes: bytes, work)
    }

    /// Hands URLSession the answer (once; a remote file protocol's step's, made by FileWire).
    private func deliver(_ answer: HTTPURLResponse) {
        responseDelivered = true
        deliver { $0 { $1.urlProtocol($0, didReceive: answer, cacheStoragePolicy: .notAllowed) } }
    }

    private func deliverResponseIfNeeded() {
        guard !responseDelivered, response.complete, let url = request.url else { return }
        responseDelivered = true
        guard let http = response.httpResponse(url: url) else { return }
        deliver { $0 { $1.urlProtocol($0, didReceive: http, cacheStoragePolicy: .notAllowed) } }
    }

    // MARK: libcurl callbacks (transport thread)

    fileprivate func received(header line: UnsafeMutablePointer<CChar>, count: Int) -> Int {
        let text = String(decoding: UnsafeRawBufferPointer(start: line, count: count), as: UTF8.self)
        response.add(line: text)
        if let url = request.url, let interim = response.takeInterim(url: url) {
            delegate?.transportInformational(for: task, response: interim)
        }
        guard response.complete else { return count }
        // Only an answer to a transfer that offered HTTP/2 says whether the host multiplexes (a limited one keeps
        // HTTP/1.1 whatever the host offers: told, it took the host out of the multiplexed ones and its caps flapped).
        if askedForHTTP2, let url = request.url {
            delegate?.transportAnswered(for: task, url: url, multiplexed: response.version.hasPrefix("HTTP/2"))
        }
        if (300..<400).contains(response.status), let location = response.value("Location"),
           let next = redirectTarget(location) {
            redirect = next
        } else {
            deliverResponseIfNeeded()
        }
        return count
    }

    private func redirectTarget(_ location: String) -> URLRequest? {
        guard let current = request.url,
              let target = URL(string: String(HTTPText.trimmed(location)), relativeTo: current)?.absoluteURL,
              let http = response.httpResponse(url: current) else { return nil }
        var next = request
        next.url = target
        let method = (request.httpMethod ?? "GET").uppercased()
        if response.status == 303 && method != "HEAD" { next.httpMethod = "GET" }
        if let delegate { return delegate.transportRedirect(for: task, response: http, to: next) }
        // Without a delegate that decides: follow for requests without a body, over http(s) only.
        let scheme = target.scheme?.lowercased()
        return body == nil && (scheme == "http" || scheme == "https") ? next : nil
    }

    /// Returns `count` when the bytes were taken, or the pause code (libcurl hands the same bytes again later).
    fileprivate func received(data: UnsafeMutablePointer<CChar>, count: Int) -> Int {
        if redirect != nil || finished || file?.dropsBody == true { return count }
        if let file, !responseDelivered, let easy, let answer = file.answerBeforeBody(easy) { deliver(answer) }
        if courier.mustWait() {
            flush()
            return FERRY_CURL_FUNC_PAUSE
        }
        if pacer.limited {
            let now = monotonicSeconds()
            guard pacer.allowance(now) > 0 else { return waitForRate(now) }
            pacer.spend(count, now: now)
        }
        pacer.count(count)
        if !held {
            held = true
            transport.willHold(self)
        }
        if pending.isEmpty { pending.reserveCapacity(min(deliverySize, max(count, expectedRemaining))) }
        received += count
        pending.append(UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: count)
        if pending.count >= deliverySize { flush() }
        return count
    }

    fileprivate func send(into buffer: UnsafeMutablePointer<CChar>, count: Int) -> Int {
        guard let body else { return 0 }
        var count = count
        let limited = pacer.limited
        let now = limited ? monotonicSeconds() : 0
        if limited {
            let available = pacer.allowance(now)
            guard available > 0 else { return waitForRate(now) }
            count = min(count, max(available, 16 << 10))
        }
        do {
            guard let n = try body.read(into: buffer, count: count) else { return FERRY_CURL_FUNC_PAUSE }
            if n > 0 {
                pacer.count(n)
                if limited { pacer.spend(n, now: now) }
                delegate?.transportDidSend(for: task, bytes: Int64(n))
            }
            return n
        } catch {
            bodyFailure = error.message
            bodyFailureKind = error.kind
            return FERRY_CURL_READFUNC_ABORT
        }
    }
}

extension CurlTransfer {
    /// Pauses for the rate: the transport lifts the pause when the buckets' debts are repaid.
    fileprivate func waitForRate(_ now: TimeInterval) -> Int {
        pacer.hold(now)
        transport.waitForRate(self)
        return FERRY_CURL_FUNC_PAUSE
    }

    /// Measures its intake over the last `interval` seconds and starts the next measurement.
    func measureIntake(over interval: TimeInterval) { pacer.measureIntake(over: interval) }

    /// The transport decided which bucket of the engine's rate this transfer also takes from (nil: none).
    func share(_ shared: SharedBucket?) { pacer.share(shared) }

    /// The transport's bucket of this transfer's item's own rate, which its transfers before and after it take
    /// from too (nil: the item has no rate of its own).
    func shareItem(_ bucket: SharedBucket?) { pacer.shareItem(bucket) }
    func shareBatch(_ bucket: SharedBucket?) { pacer.shareBatch(bucket) }

    /// The transport decided this transfer's share of its limits (nil: unlimited).
    func setRate(_ rate: Double?, now: TimeInterval) {
        let before = pacer.rate
        pacer.setRate(rate, now: now)
        if limits?.direction == .download, before != rate, let easy {
            _ = ferry_curl_easy_set_receive_buffer(easy, Self.receiveBuffer(for: rate))
        }
    }

    /// The kernel's receive buffer for a limited download: a quarter second's worth (Linux doubles what it
    /// is given). Autotuned, it grows to several MiB, which the server sends at link speed before the limit
    /// shows: a 40 MiB download limited to 2 MiB/s looked like 2.23 MiB/s from the server. Unlimited again
    /// (a limit lifted live), the socket gets a buffer large enough for a fast link.
    static func receiveBuffer(for rate: Double?) -> Int {
        guard let rate else { return 4 << 20 }
        return min(4 << 20, max(32 << 10, Int(rate / 8)))
    }

    /// Its rates changed while it waits for its rate: it goes on when they now allow (RatePacer.ratesChanged).
    func rateChanged(now: TimeInterval) { pacer.ratesChanged(now: now) }

    /// Lifted from a pause for the rate (on the transport's thread).
    func rateWaitEnded() { pacer.waitEnded() }
}

private func transfer(_ userdata: UnsafeMutableRawPointer?) -> CurlTransfer {
    Unmanaged<CurlTransfer>.fromOpaque(userdata!).takeUnretainedValue()
}

private let curlWrite: ferry_curl_data_callback = { data, size, count, userdata in
    transfer(userdata).received(data: data!, count: size * count)
}

private let curlHeader: ferry_curl_data_callback = { line, size, count, userdata in
    transfer(userdata).received(header: line!, count: size * count)
}

private let curlRead: ferry_curl_data_callback = { buffer, size, count, userdata in
    transfer(userdata).send(into: buffer!, count: size * count)
}

func hostDescription(_ url: URL?) -> String {
    guard let url, let host = url.host else { return "the server" }
    let shown = host.contains(":") ? "[\(host)]" : host
    return url.port.map { "\(shown):\($0)" } ?? shown
}
