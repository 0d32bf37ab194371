//! A user's browser for the backend OAuth flow: keeps the cookies the gateway sets (all of them, for every host:
//! the tests talk to loopback only), follows no redirect by itself, and walks the gateway's start page → its
//! consent form → the authorization server (which approves at once) → the gateway's callback, step by step.

use std::sync::Mutex;

use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use reqwest::{Response, StatusCode, Url};

pub struct Browser {
    http: reqwest::Client,
    /// (name, value) of every live cookie.
    cookies: Mutex<Vec<(String, String)>>,
}

impl Browser {
    pub fn new() -> Browser {
        let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("http");
        Browser { http, cookies: Mutex::default() }
    }

    /// The `Cookie` header this browser sends.
    pub fn cookie_header(&self) -> String {
        let cookies = self.cookies.lock().expect("lock");
        cookies.iter().map(|(name, value)| format!("{name}={value}")).collect::<Vec<_>>().join("; ")
    }

    fn keep(&self, response: &Response) {
        let mut cookies = self.cookies.lock().expect("lock");
        for set in response.headers().get_all(SET_COOKIE) {
            let text = set.to_str().expect("ascii");
            let (pair, attributes) = text.split_once(';').unwrap_or((text, ""));
            let (name, value) = pair.split_once('=').expect("name=value");
            cookies.retain(|(kept, _)| kept != name);
            if !attributes.contains("Max-Age=0") {
                cookies.push((name.to_owned(), value.to_owned()));
            }
        }
    }

    pub async fn get(&self, url: &str) -> Response {
        let response = self.http.get(url).header(COOKIE, self.cookie_header()).send().await.expect("GET");
        self.keep(&response);
        response
    }

    pub async fn post_form(&self, url: &str, form: &[(&str, &str)]) -> Response {
        let request = self.http.post(url).header(COOKIE, self.cookie_header()).form(form);
        let response = request.send().await.expect("POST");
        self.keep(&response);
        response
    }

    /// Opens the gateway's start page `start`: its status and HTML.
    pub async fn open(&self, start: &str) -> (StatusCode, String) {
        let page = self.get(start).await;
        (page.status(), page.text().await.expect("a page"))
    }

    /// Opens the start page and submits its consent form: the gateway's answer (a redirect to the authorization
    /// server when it accepts).
    pub async fn consent(&self, start: &str) -> Response {
        let (status, page) = self.open(start).await;
        assert_eq!(status, 200, "{page}");
        let field = |name: &str| hidden(&page, name).unwrap_or_else(|| panic!("no `{name}` in {page}"));
        let (flow, consent) = (field("flow"), field("consent"));
        let action = Url::parse(start).expect("start URL").join("start").expect("form action");
        self.post_form(action.as_str(), &[("flow", &flow), ("consent", &consent)]).await
    }

    /// Consents at the start page and lets the authorization server approve: the callback URL it redirects to
    /// (not visited yet).
    pub async fn callback_for(&self, start: &str) -> String {
        let consented = self.consent(start).await;
        assert_eq!(consented.status(), 303, "the consent sends the browser on");
        let server = self.get(&location(&consented)).await;
        assert_eq!(server.status(), 302, "the authorization server approves");
        location(&server)
    }

    /// The whole flow: the callback page's status and text.
    pub async fn authorize(&self, start: &str) -> (StatusCode, String) {
        let callback = self.callback_for(start).await;
        let page = self.get(&callback).await;
        (page.status(), page.text().await.expect("a page"))
    }
}

pub fn location(response: &Response) -> String {
    response.headers()[LOCATION].to_str().expect("ascii").to_owned()
}

/// The value of the hidden form field `name` in the consent page.
pub fn hidden(page: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page.find(&marker)? + marker.len();
    Some(page[start..].split('"').next()?.to_owned())
}
