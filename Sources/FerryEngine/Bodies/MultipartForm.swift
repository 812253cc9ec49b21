import FerryModel
import FerryStorage
import FerryTransport
import Foundation

/// multipart/form-data (RFC 7578) composed on the fly: part headers and the closing boundary are small
/// byte pieces; file parts are referenced, never read into memory.
public struct MultipartForm: Sendable, Equatable {
    public var parts: [FormPart]
    public var boundary: String

    public init(parts: [FormPart], boundary: String = MultipartForm.randomBoundary()) {
        self.parts = parts
        self.boundary = boundary
    }

    public static func randomBoundary() -> String {
        var generator = SystemRandomNumberGenerator()
        let hex = (0..<4).map { _ in String(generator.next() as UInt64, radix: 16) }.joined()
        return "ferry-" + hex
    }

    public var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    /// Escapes a name or file name for a quoted header parameter so that no header can be injected:
    /// `"`, CR, LF and `\` are percent-encoded (as browsers do for the first three).
    public static func escape(_ value: String) -> String {
        var out = ""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "%22"
            case "\r": out += "%0D"
            case "\n": out += "%0A"
            case "\\": out += "%5C"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// The body as pieces, after checking every file and that no text field contains the boundary
    /// (a clash picks a new boundary).
    public func plan() throws(BodyError) -> BodyPlan {
        var form = self
        while form.parts.contains(where: { part in
            if case let .field(_, value) = part { return value.contains(form.boundary) }
            return false
        }) {
            form.boundary = Self.randomBoundary()
        }
        var pieces: [BodyPlan.Piece] = []
        var pending = Data()
        for part in form.parts {
            pending.append(Data("--\(form.boundary)\r\n".utf8))
            switch part {
            case let .field(name, value):
                pending.append(Data("Content-Disposition: form-data; name=\"\(Self.escape(name))\"\r\n\r\n".utf8))
                pending.append(Data(value.utf8))
            case let .file(name, source, fileName, contentType):
                let safeType = contentType.unicodeScalars.contains { $0 == "\r" || $0 == "\n" } ? MIMETypes.fallback : contentType
                pending.append(Data(("Content-Disposition: form-data; name=\"\(Self.escape(name))\"; "
                    + "filename=\"\(Self.escape(fileName))\"\r\nContent-Type: \(safeType)\r\n\r\n").utf8))
                guard source != .standardInput else {
                    throw BodyError("standard input can only be sent as a raw body (ferry put - URL), not as a form part")
                }
                pieces.append(.bytes(pending))
                pending = Data()
                pieces.append(try BodyPlan.piece(for: source))
            }
            pending.append(Data("\r\n".utf8))
        }
        pending.append(Data("--\(form.boundary)--\r\n".utf8))
        pieces.append(.bytes(pending))
        return BodyPlan(pieces: pieces, contentType: form.contentType)
    }
}
