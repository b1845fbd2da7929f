# The kubectl gitops image, for the in-cluster controller (deploy/controller):
# a static binary on distroless, non-root. make image builds it.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=v0.1.0-dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/kubectl-gitops/kubectl-gitops/plugin.version=${VERSION}" -o /kubectl-gitops ./cmd/kubectl-gitops

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /kubectl-gitops /kubectl-gitops
USER 65532:65532
ENTRYPOINT ["/kubectl-gitops"]
