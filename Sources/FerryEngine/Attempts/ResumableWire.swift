import FerryModel
import FerryStorage
import FerryTransport
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Synchronization

/// The requests of a resumable upload: the item's headers, and the credentials of the request's host only
/// (a location on another host than the item's gets none of them, as a redirect would not).
struct ResumableRequests: Sendable {
    let spec: TransferSpec
    let userAgent: String
    let timeout: TimeInterval
    let credentials: HostCredentials

    func make(_ method: String, _ url: URL) -> URLRequest {
        var target = spec
        target.url = url
        var request = RequestHeaders.request(for: target, method: method, userAgent: userAgent, timeout: timeout,
                                             credentials: credentials)
        if !RequestHeaders.sameOrigin(url, spec.url) {
            request = RequestHeaders.forRedirect(request, previous: spec.url, credentials: credentials)
        }
        return request
    }

    /// The DELETE that ends the upload's copy on the server; nil when it has none.
    func cancellation(_ upload: ResumableUpload) -> URLRequest? {
        guard let location = upload.location.flatMap(URL.init(string:)) else { return nil }
        return ResumableWire(kind: upload.kind).cancellation(make("DELETE", location))
    }
}

/// The words of the two resumable protocols: which headers each request carries and what an answer means.
struct ResumableWire {
    let kind: ResumableProtocol

    static let tusVersion = "1.0.0"
    private var interop: String { String(ResumableProtocol.ietfInteropVersion) }

    /// The upload itself, offering the IETF protocol (a server that does not know it sees a plain upload).
    func creation(_ upload: URLRequest) -> URLRequest {
        var request = upload
        request.setValue(interop, forHTTPHeaderField: "Upload-Draft-Interop-Version")
        request.setValue("?1", forHTTPHeaderField: "Upload-Complete")
        return request
    }

    /// The upload made with its first `count` bytes of `length`, more to follow (to a host seen to speak the draft).
    func creation(_ upload: URLRequest, firstChunk count: Int64, of length: Int64) -> URLRequest {
        var request = creation(upload)
        request.setValue("?0", forHTTPHeaderField: "Upload-Complete")
        request.setValue(String(count), forHTTPHeaderField: "Content-Length")
        request.setValue(String(length), forHTTPHeaderField: "Upload-Length")
        return request
    }

    /// tus: an upload of `length` bytes made at the creation endpoint, named by its metadata.
    func tusCreation(_ base: URLRequest, length: Int64, fileName: String, contentType: String) -> URLRequest {
        var request = base
        request.setValue(Self.tusVersion, forHTTPHeaderField: "Tus-Resumable")
        request.setValue(String(length), forHTTPHeaderField: "Upload-Length")
        request.setValue("0", forHTTPHeaderField: "Content-Length")
        request.setValue(nil, forHTTPHeaderField: "Content-Type")
        let metadata = [("filename", fileName), ("filetype", contentType)]
            .map { "\($0.0) \(Data($0.1.utf8).base64EncodedString())" }.joined(separator: ",")
        request.setValue(metadata, forHTTPHeaderField: "Upload-Metadata")
        return request
    }

    /// The server's offset for the upload.
    func offsetRequest(_ base: URLRequest) -> URLRequest {
        var request = protocolHeaders(base)
        request.setValue(nil, forHTTPHeaderField: "Content-Type")
        return request
    }

    /// `length` bytes from `offset`; `last`: they end the file.
    func append(_ base: URLRequest, offset: Int64, length: Int64, last: Bool) -> URLRequest {
        var request = protocolHeaders(base)
        request.setValue(String(offset), forHTTPHeaderField: "Upload-Offset")
        request.setValue(String(length), forHTTPHeaderField: "Content-Length")
        switch kind {
        case .ietf:
            request.setValue(last ? "?1" : "?0", forHTTPHeaderField: "Upload-Complete")
            request.setValue("application/partial-upload", forHTTPHeaderField: "Content-Type")
        case .tus:
            request.setValue("application/offset+octet-stream", forHTTPHeaderField: "Content-Type")
        }
        return request
    }

    /// Ends the upload on the server (an upload cancelled in ferry).
    func cancellation(_ base: URLRequest) -> URLRequest {
        var request = protocolHeaders(base)
        request.setValue(nil, forHTTPHeaderField: "Content-Type")
        request.setValue("0", forHTTPHeaderField: "Content-Length")
        return request
    }

    private func protocolHeaders(_ base: URLRequest) -> URLRequest {
        var request = base
        switch kind {
        case .ietf: request.setValue(interop, forHTTPHeaderField: "Upload-Draft-Interop-Version")
        case .tus: request.setValue(Self.tusVersion, forHTTPHeaderField: "Tus-Resumable")
        }
        return request
    }

    /// The server does not know the upload (any more).
    func forgotten(_ status: Int) -> Bool {
        status == 404 || status == 410 || (kind == .tus && status == 403)
    }

    /// What the answer says of the upload's completeness: true every byte arrived, false not, nil it does not
    /// say (tus has no such flag: the offset reaching the length is the end). Who reads it decides what unsaid
    /// means: after a HEAD not complete (an empty append says the end), after bytes sent complete.
    func completeness(_ answer: UploadAnswer) -> Bool? {
        guard kind == .ietf else { return nil }
        func flag(_ name: String) -> Bool? {
            switch answer.value(name)?.trimmingCharacters(in: .whitespaces) {
            case "?1": true
            case "?0": false
            default: nil
            }
        }
        // Interop version 3 said it the other way round.
        return flag("Upload-Complete") ?? flag("Upload-Incomplete").map { !$0 }
    }

    /// A non-negative integer header (a structured-field integer or plain digits).
    static func integer(_ text: String) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.count <= 18, trimmed.allSatisfy(\.isASCIIDigit) else { return nil }
        return Int64(trimmed)
    }

    /// A Location, relative or not, as an absolute http(s) URL.
    static func resolve(_ value: String, against base: URL) -> URL? {
        guard let url = URL(string: value.trimmingCharacters(in: .whitespaces), relativeTo: base)?.absoluteURL,
              let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else { return nil }
        return url
    }
}

private extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}
