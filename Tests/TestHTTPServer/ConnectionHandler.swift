import FerryModel
import FerryStorage
import Foundation
import NIOCore
import NIOHTTP1

/// One per connection (one per stream on an HTTP/2 connection); everything here runs on its event loop.
final class ConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    /// Size of one body write; the next is issued when the previous one has been written.
    static let sliceSize = 256 * 1024

    private struct Incoming {
        var head: HTTPRequestHead
        var hasher = SHA256()
        var length = 0
        var prefix = Data()
        var chunked: Bool
        var expectContinue: Bool
    }

    private let core: ServerCore
    private var incoming: Incoming?
    /// Requests on this connection counted as in flight in `core` and not yet ended.
    private var openRequests = 0
    private var active = true

    /// The connection's number (ChannelRegistry.register): an HTTP/2 connection's streams share it.
    let connection: Int

    init(core: ServerCore, connection: Int) {
        self.core = core
        self.connection = connection
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            openRequests += 1
            core.requestStarted()
            let chunked = head.headers["transfer-encoding"].contains { $0.lowercased().contains("chunked") }
            let expect = head.headers["expect"].contains {
                $0.trimmingCharacters(in: .whitespaces).lowercased() == "100-continue"
            }
            incoming = Incoming(head: head, chunked: chunked, expectContinue: expect)
            if expect {
                let interim = HTTPResponseHead(version: head.version, status: .continue)
                context.writeAndFlush(wrapOutboundOut(.head(interim)), promise: nil)
            }
        case .body(let buffer):
            guard var req = incoming else { return }
            incoming = nil  // keep the Data uniquely referenced while appending
            core.recordTraffic(pathOf(req.head.uri), received: buffer.readableBytes)
            buffer.withUnsafeReadableBytes { raw in
                req.hasher.update(bufferPointer: raw)
                req.length += raw.count
                let room = RecordedRequest.bodyPrefixLimit - req.prefix.count
                if room > 0, let base = raw.baseAddress {
                    req.prefix.append(base.assumingMemoryBound(to: UInt8.self), count: min(room, raw.count))
                }
            }
            incoming = req
        case .end:
            guard let req = incoming else { return }
            incoming = nil
            let digest = req.hasher.finalize().map { String(format: "%02x", $0) }.joined()
            let recorded = RecordedRequest(
                method: req.head.method.rawValue,
                uri: req.head.uri,
                headers: req.head.headers.map { (name: $0.name, value: $0.value) },
                bodyLength: req.length,
                bodySHA256: digest,
                body: req.prefix,
                chunked: req.chunked,
                expectContinue: req.expectContinue,
                receivedAt: Date(),
                version: "HTTP/\(req.head.version.major).\(req.head.version.minor)",
                connection: connection
            )
            let behavior = core.record(recorded)
            respond(context: context, head: req.head, behavior: behavior)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        active = false
        core.requestEnded(count: openRequests)
        openRequests = 0
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is HTTPParserError {
            // HTTPServerProtocolErrorHandler has already queued the 400; closing flushes it first.
            core.badRequest()
        }
        context.close(promise: nil)
    }

    // MARK: Responses

    private func respond(context: ChannelHandlerContext, head: HTTPRequestHead, behavior: Behavior?) {
        let keepAlive = head.isKeepAlive
        let isHEAD = head.method == .HEAD
        guard let behavior else {
            sendSimple(context: context, version: head.version, status: 404, headers: [],
                       body: Data("Not Found\n".utf8), keepAlive: keepAlive, isHEAD: isHEAD)
            return
        }
        switch behavior {
        case .serve(let resource, let options):
            serve(context: context, request: head, resource: resource, options: options)
        case .status(let code, let headers, let body):
            sendSimple(context: context, version: head.version, status: code, headers: headers,
                       body: body, keepAlive: keepAlive, isHEAD: isHEAD)
        case .redirect(let code, let location):
            sendSimple(context: context, version: head.version, status: code, headers: [("Location", location)],
                       body: Data(), keepAlive: keepAlive, isHEAD: isHEAD)
        case .hang:
            break  // stays in flight until the connection closes
        case .closeWithoutResponse:
            context.close(promise: nil)
        }
    }

    private func sendSimple(
        context: ChannelHandlerContext, version: HTTPVersion, status: Int, headers: [(String, String)],
        body: Data, keepAlive: Bool, isHEAD: Bool
    ) {
        var h = HTTPHeaders(headers)
        if !h.contains(name: "content-length") && !h.contains(name: "transfer-encoding") {
            h.add(name: "Content-Length", value: String(body.count))
        }
        if !keepAlive { h.replaceOrAdd(name: "Connection", value: "close") }
        let head = HTTPResponseHead(version: version, status: HTTPResponseStatus(statusCode: status), headers: h)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if !isHEAD && !body.isEmpty {
            var buffer = context.channel.allocator.buffer(capacity: body.count)
            buffer.writeBytes(body)
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        finish(context: context, keepAlive: keepAlive)
    }

    /// Writes the end of the response; once written, the request stops counting as in flight.
    private func finish(context: ChannelHandlerContext, keepAlive: Bool) {
        let promise = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: promise)
        promise.futureResult.assumeIsolated().whenComplete { result in
            self.endOneRequest()
            if !keepAlive || (try? result.get()) == nil {
                context.close(promise: nil)
            }
        }
    }

    private func endOneRequest() {
        if openRequests > 0 {
            openRequests -= 1
            core.requestEnded()
        }
    }

    private struct ServePlan {
        var status: HTTPResponseStatus
        var headers: HTTPHeaders
        var start = 0
        var length = 0
    }

    static func rangeSatisfying(_ value: String, size: Int) -> (start: Int, end: Int)?? {
        // nil: ignore the header; .some(nil): unsatisfiable; .some(range): inclusive range.
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes=") else { return nil }
        let spec = trimmed.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return nil }
        let first = spec[spec.startIndex..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        if first.isEmpty {
            // Suffix range: the last N bytes.
            guard let n = Int(last), n >= 0 else { return nil }
            if n == 0 || size == 0 { return .some(nil) }
            return .some((max(0, size - n), size - 1))
        }
        guard let start = Int(first), start >= 0 else { return nil }
        var end = size - 1
        if !last.isEmpty {
            guard let e = Int(last), e >= start else { return nil }
            end = min(e, size - 1)
        }
        if start >= size { return .some(nil) }
        return .some((start, end))
    }

    private func plan(request: HTTPRequestHead, resource: Resource, options: ServeOptions) -> ServePlan {
        let size = resource.body.count
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: resource.contentType)
        headers.add(name: "Accept-Ranges", value: "bytes")
        if let etag = resource.etag { headers.add(name: "ETag", value: etag) }
        if let lm = resource.lastModified { headers.add(name: "Last-Modified", value: lm) }
        if let cd = resource.contentDisposition { headers.add(name: "Content-Disposition", value: cd) }

        var useRange = options.honorRange
        if useRange, let ifRange = request.headers.first(name: "if-range") {
            let etagMatches = resource.etag.map { !$0.hasPrefix("W/") && $0 == ifRange } ?? false
            let dateMatches = resource.lastModified.map { $0 == ifRange } ?? false
            useRange = etagMatches || dateMatches
        }
        var plan = ServePlan(status: .ok, headers: headers, start: 0, length: size)
        if useRange, let rangeHeader = request.headers.first(name: "range"),
            let outcome = Self.rangeSatisfying(rangeHeader, size: size)
        {
            if let (start, end) = outcome {
                plan.status = .partialContent
                plan.start = start
                plan.length = end - start + 1
                plan.headers.add(name: "Content-Range", value: "bytes \(start)-\(end)/\(size)")
            } else {
                plan.status = .rangeNotSatisfiable
                plan.length = 0
                plan.headers.add(name: "Content-Range", value: "bytes */\(size)")
                plan.headers.add(name: "Content-Length", value: "0")
                return plan
            }
        }
        if options.sendContentLength {
            plan.headers.add(name: "Content-Length", value: String(plan.length))
        } else {
            plan.headers.add(name: "Transfer-Encoding", value: "chunked")
        }
        return plan
    }

    private func serve(context: ChannelHandlerContext, request: HTTPRequestHead, resource: Resource, options: ServeOptions) {
        var plan = plan(request: request, resource: resource, options: options)
        let keepAlive = request.isKeepAlive
        if !keepAlive { plan.headers.replaceOrAdd(name: "Connection", value: "close") }
        let isHEAD = request.method == .HEAD
        let go = {
            guard self.active else { return }
            let head = HTTPResponseHead(version: request.version, status: plan.status, headers: plan.headers)
            context.write(self.wrapOutboundOut(.head(head)), promise: nil)
            if isHEAD || plan.status == .rangeNotSatisfiable {
                self.finish(context: context, keepAlive: keepAlive)
                return
            }
            context.flush()
            var limit = plan.length
            if let cut = options.cutAfter { limit = max(0, min(cut, plan.length)) }
            if let stall = options.stallAfter { limit = max(0, min(stall, plan.length)) }
            let streamer = BodyStreamer(
                handler: self, context: context, path: pathOf(request.uri), body: resource.body,
                offset: plan.start, remaining: limit, cut: options.cutAfter != nil, stall: options.stallAfter != nil,
                bytesPerSecond: options.bytesPerSecond, keepAlive: keepAlive
            )
            streamer.writeNext()
        }
        if let delay = options.delayBeforeHead, delay > 0 {
            context.eventLoop.assumeIsolated().scheduleTask(in: .nanoseconds(Int64(delay * 1e9))) { go() }
        } else {
            go()
        }
    }

    /// Streams a body slice by slice, each write issued when the previous one completed.
    private final class BodyStreamer {
        let handler: ConnectionHandler
        let context: ChannelHandlerContext
        let path: String
        let body: Data
        var offset: Int
        var remaining: Int
        let cut: Bool
        let stall: Bool
        let bytesPerSecond: Int?
        let keepAlive: Bool
        let started = NIODeadline.now()
        var sent = 0

        init(handler: ConnectionHandler, context: ChannelHandlerContext, path: String, body: Data, offset: Int, remaining: Int,
             cut: Bool, stall: Bool, bytesPerSecond: Int?, keepAlive: Bool) {
            self.handler = handler
            self.context = context
            self.path = path
            self.body = body
            self.offset = offset
            self.remaining = remaining
            self.cut = cut
            self.stall = stall
            self.bytesPerSecond = bytesPerSecond
            self.keepAlive = keepAlive
        }

        func writeNext() {
            guard handler.active else { return }
            if remaining == 0 {
                if stall {
                    // Silent from here on; in flight until the client closes (or the test cuts it).
                    handler.core.stalled(path, on: context.channel)
                    return
                }
                if cut {
                    context.close(promise: nil)
                } else {
                    handler.finish(context: context, keepAlive: keepAlive)
                }
                return
            }
            var n = min(remaining, ConnectionHandler.sliceSize)
            if let bps = bytesPerSecond, bps > 0 {
                n = min(n, max(1, bps / 40))
            }
            var buffer = context.channel.allocator.buffer(capacity: n)
            let from = offset
            body.withUnsafeBytes { raw in
                _ = buffer.writeBytes(UnsafeRawBufferPointer(rebasing: raw[from..<(from + n)]))
            }
            offset += n
            remaining -= n
            sent += n
            let promise = context.eventLoop.makePromise(of: Void.self)
            context.writeAndFlush(handler.wrapOutboundOut(.body(.byteBuffer(buffer))), promise: promise)
            promise.futureResult.assumeIsolated().whenComplete { result in
                guard (try? result.get()) != nil else {
                    self.context.close(promise: nil)
                    return
                }
                self.handler.core.recordTraffic(self.path, sent: n)
                if let bps = self.bytesPerSecond, bps > 0, self.remaining > 0 {
                    let due = self.started + .nanoseconds(Int64(Double(self.sent) / Double(bps) * 1e9))
                    let now = NIODeadline.now()
                    if due > now {
                        self.context.eventLoop.assumeIsolated().scheduleTask(deadline: due) { self.writeNext() }
                        return
                    }
                }
                self.writeNext()
            }
        }
    }
}
