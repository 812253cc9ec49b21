import FerryModel
import FerryStorage
import FerryTransport

/// Content types by file extension, for upload bodies and multipart file parts.
public enum MIMETypes {
    public static let fallback = "application/octet-stream"

    static let byExtension: [String: String] = [
        // images
        "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
        "svg": "image/svg+xml", "bmp": "image/bmp", "ico": "image/vnd.microsoft.icon", "tif": "image/tiff",
        "tiff": "image/tiff", "heic": "image/heic", "avif": "image/avif",
        // video
        "mp4": "video/mp4", "m4v": "video/mp4", "mkv": "video/x-matroska", "webm": "video/webm", "mov": "video/quicktime",
        "avi": "video/x-msvideo", "mpeg": "video/mpeg", "mpg": "video/mpeg",
        // audio
        "mp3": "audio/mpeg", "m4a": "audio/mp4", "aac": "audio/aac", "ogg": "audio/ogg", "oga": "audio/ogg",
        "opus": "audio/opus", "wav": "audio/wav", "flac": "audio/flac",
        // text
        "txt": "text/plain", "text": "text/plain", "log": "text/plain", "md": "text/markdown", "csv": "text/csv",
        "tsv": "text/tab-separated-values", "html": "text/html", "htm": "text/html", "css": "text/css",
        "js": "text/javascript", "mjs": "text/javascript", "xml": "application/xml", "yaml": "application/yaml",
        "yml": "application/yaml", "toml": "application/toml",
        // data and documents
        "json": "application/json", "pdf": "application/pdf", "wasm": "application/wasm",
        "doc": "application/msword", "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "odt": "application/vnd.oasis.opendocument.text",
        // archives
        "zip": "application/zip", "gz": "application/gzip", "tgz": "application/gzip", "bz2": "application/x-bzip2",
        "xz": "application/x-xz", "zst": "application/zstd", "tar": "application/x-tar", "7z": "application/x-7z-compressed",
        "rar": "application/vnd.rar", "iso": "application/x-iso9660-image", "deb": "application/vnd.debian.binary-package",
        "rpm": "application/x-rpm",
    ]

    /// The type for a file name, by its last extension (case-insensitive); `fallback` when unknown.
    public static func type(forFileName name: String) -> String {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return fallback }
        return byExtension[name[name.index(after: dot)...].lowercased()] ?? fallback
    }
}
