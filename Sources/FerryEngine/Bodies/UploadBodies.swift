import FerryModel
import Foundation

extension UploadSpec {
    /// An upload of one file (or standard input), as `ferry put` and the screen's `u` make it: the source as
    /// the whole body (PUT unless `method` says POST), or with `form` (its other parts, perhaps none) a
    /// multipart/form-data body with the source as the file part `field` first (POST unless `method` says PUT).
    /// `resumable`: the protocol a raw file's upload speaks (the IETF one is offered by default, as URLSession
    /// does; a server that does not know it sees an ordinary upload). A form or standard input is sent plain;
    /// tus, asked for explicitly, takes a file only.
    public static func of(_ source: UploadSource, contentType: String?, form: [FormPart]?, field: String = "file",
                          method: String?, resumable: ResumableProtocol? = .ietf) throws(UsageError) -> UploadSpec {
        let type: String
        switch source {
        case let .file(path): type = contentType ?? MIMETypes.type(forFileName: path)
        case .standardInput: type = contentType ?? MIMETypes.fallback
        }
        let body: Body
        if let form {
            body = .multipart([.file(name: field, source: source, fileName: source.displayName, contentType: type)] + form)
        } else {
            body = .raw(source, contentType: type)
        }
        let verb = (method ?? (form == nil ? "PUT" : "POST")).uppercased()
        guard verb == "PUT" || verb == "POST" else { throw UsageError("-X takes PUT or POST, got '\(TerminalSafe.sanitize(verb))'") }
        var spec = UploadSpec(method: verb, body: body)
        if resumable == .tus, !spec.canResume {
            throw UsageError("--tus sends one file as the upload's bytes: it cannot send a form (-F) or standard input")
        }
        if spec.canResume { spec.resumable = resumable }
        return spec
    }

    /// `of`, sent to `url`. Over a file protocol (sftp, scp, ftp) an upload is the file's bytes written to the
    /// remote path: no form, no POST, no HTTP resumable-upload protocol (a resume asks the server for the size it
    /// has); a URL ending in `/` is a directory, and the file keeps its name in it (as scp and sftp's put do).
    public static func to(_ url: URL, _ source: UploadSource, contentType: String?, form: [FormPart]?, field: String = "file",
                          method: String?, resumable: ResumableProtocol? = .ietf) throws(UsageError) -> (upload: UploadSpec, url: URL) {
        guard let scheme = TransferScheme(url), !scheme.isHTTP else {
            return (try of(source, contentType: contentType, form: form, field: field, method: method, resumable: resumable), url)
        }
        if form != nil { throw UsageError("\(scheme.rawValue) uploads a file as it is: a form (-F) is HTTP's") }
        if let method, method.uppercased() != "PUT" { throw UsageError("\(scheme.rawValue) writes the file: -X \(TerminalSafe.sanitize(method)) is HTTP's") }
        if resumable == .tus { throw UsageError("--tus is an HTTP protocol: \(scheme.rawValue) resumes an upload by itself") }
        var spec = try of(source, contentType: contentType, form: nil, method: "PUT", resumable: nil)
        spec.resumable = nil
        guard url.hasDirectoryPath || url.path.isEmpty else { return (spec, url) }
        return (spec, url.appendingPathComponent(source.displayName))
    }
}
